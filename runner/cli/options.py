"""Options more than one command takes, defined once."""

from __future__ import annotations

import argparse

from runner.protocol.mcp import LOG_LEVELS


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
