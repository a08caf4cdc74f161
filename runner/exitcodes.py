"""The exit codes of every mcp-run command: one table, used by the code and printed by ``--help``."""

from __future__ import annotations

import enum
from collections.abc import Iterable

__all__ = ["EXIT_CODE_HELP", "ExitCode", "combine"]


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    PROTOCOL = 3
    UNREACHABLE = 4
    OUTCOME_UNKNOWN = 5
    BUSY = 6
    SIGINT = 130
    SIGTERM = 143


_MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.FAILED: "failed: a tool error, a failed step or item, an output not rendered or not written",
    ExitCode.USAGE: "usage error, invalid workflow, an unusable state dir, --output or --inputs-file, or a damaged "
    "journal",
    ExitCode.PROTOCOL: "protocol error: the server answered with a JSON-RPC error or broke the protocol",
    ExitCode.UNREACHABLE: "server unreachable: could not connect or initialize (the run stays open)",
    ExitCode.OUTCOME_UNKNOWN: "outcome unknown: a call may or may not have happened",
    ExitCode.BUSY: "busy: another process is running this workflow (or holds the run)",
    ExitCode.SIGINT: "interrupted by SIGINT",
    ExitCode.SIGTERM: "interrupted by SIGTERM",
}

# When several apply, the first in this list wins.
_PRECEDENCE: tuple[ExitCode, ...] = (
    ExitCode.SIGINT,
    ExitCode.SIGTERM,
    ExitCode.BUSY,
    ExitCode.USAGE,
    ExitCode.OUTCOME_UNKNOWN,
    ExitCode.UNREACHABLE,
    ExitCode.PROTOCOL,
    ExitCode.FAILED,
    ExitCode.OK,
)


def combine(codes: Iterable[ExitCode]) -> ExitCode:
    """The one exit code for a run in which each of ``codes`` applied (130/143, 5, 4, 3, 1 order)."""
    present = set(codes)
    for code in _PRECEDENCE:
        if code in present:
            return code
    return ExitCode.OK


EXIT_CODE_HELP = "exit codes:\n" + "\n".join(f"  {int(c):>3}  {m}" for c, m in _MEANING.items())
