"""What the SDK's Python loggers say in an mcp-run process (a worker after a restart of the dev server or of
itself: "Completing activity as failed", with the exception) is one ``mcp-run: temporal:`` line each, naming the
exception, never a traceback."""

from __future__ import annotations

import subprocess
import sys

from tests.temporal.support import ROOT

SCRIPT = """
import asyncio, logging
from runner.temporal.runtime import runtime
runtime()
log = logging.getLogger("temporalio.worker._activity")
try:
    try:
        raise asyncio.CancelledError("Activity cancelled")
    except BaseException as inner:
        raise BaseExceptionGroup("Exceptions from Trio nursery (1 sub-exception)", [inner])
except BaseException:
    log.warning("Completing activity as failed (%s)", {"activity_id": "2", "attempt": 1}, exc_info=True)
log.warning("Failed polling: %s", "line one\\nline two")
logging.getLogger("temporalio.worker._activity").info("not shown")
"""


def test_sdk_log_records_are_one_prefixed_line_each() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "mcp-run: temporal: Completing activity as failed ({'activity_id': '2', 'attempt': 1}): CancelledError: "
        "Activity cancelled",
        "mcp-run: temporal: Failed polling: line one line two",
    ], done.stderr
