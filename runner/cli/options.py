"""Options more than one command takes, defined once."""

from __future__ import annotations

import argparse

from runner.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE
from runner.protocol.mcp import LOG_LEVELS
from runner.protocol.versions import PROTOCOL_CHOICES


def add_log_levels(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` (what the console shows) and ``--server-log-level`` (what servers are asked for)."""
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=LOG_LEVELS,
        help="show server log messages at or above this level (default: warning)",
    )
    parser.add_argument(
        "--server-log-level",
        default="info",
        choices=LOG_LEVELS,
        help="level asked of servers that support logging/setLevel (default: info); the journal keeps what arrives",
    )


def add_max_message_size(parser: argparse.ArgumentParser) -> None:
    """``--max-message-size``: the cap on one message from a server (the transports' default)."""
    parser.add_argument(
        "--max-message-size",
        type=int,
        default=DEFAULT_MAX_MESSAGE_SIZE,
        metavar="BYTES",
        help="largest message accepted from a server: a stdio line, a server-sent event or a JSON body "
        f"(default: {DEFAULT_MAX_MESSAGE_SIZE // (1024 * 1024)} MiB)",
    )


def add_protocol_version(parser: argparse.ArgumentParser) -> None:
    """``--protocol-version``: pin the MCP revision spoken to every server (default: each server's own)."""
    parser.add_argument(
        "--protocol-version",
        default=None,
        choices=PROTOCOL_CHOICES,
        metavar="VERSION",
        help="MCP revision to speak: auto (try 2026-07-28, fall back to the initialize handshake) or one of "
        f"{', '.join(PROTOCOL_CHOICES[1:])}; a server that does not speak it is an error (exit 4) "
        "(default: each server's 'protocol:', else auto)",
    )
