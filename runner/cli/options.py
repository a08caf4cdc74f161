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


# runner.session.answers.ELICITATION_POLICIES, spelled out: importing the session here would load trio for --version.
ELICITATION_CHOICES = ("decline", "defaults")


def add_elicitation(parser: argparse.ArgumentParser) -> None:
    """``--elicitation``: what a server's form elicitation gets (overrides every server's ``elicitation:``)."""
    parser.add_argument(
        "--elicitation",
        default=None,
        choices=ELICITATION_CHOICES,
        help="answer a server's elicitation (a form for a person): decline (default), or defaults: accept with "
        "the form's default values when every required field has one; overrides the workflow's elicitation:",
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


def add_no_cache(parser: argparse.ArgumentParser) -> None:
    """``--no-cache``: steps with ``cache:`` reuse nothing from earlier runs this time."""
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="make every call of steps with cache: (reuse no result of an earlier run); their results are "
        "still recorded for the runs after this one",
    )
