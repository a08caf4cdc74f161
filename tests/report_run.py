"""A real run (the scheduler on fake servers) that leaves succeeded, failed, retried and in-doubt items, written as
a run directory's journal: what the report tests read.

Step ``convert`` fans out over six files: ``f1`` and ``f4`` fail with the same tool error (one group), ``f2``
fails with another, ``f3`` times out (in doubt: the tool is not safe to repeat), and the first call of the run
is never delivered (retried). ``notes`` is a plain step that succeeds; ``report`` is skipped (something failed).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest
import trio
import trio.testing

from runner.engine.core.events import JOURNAL_FORMAT
from runner.engine.journal import writer
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, echo_tools, plan_of, run_plan

RUN_ID = "20261203T120000.000000Z-report"
SECRET_INPUT = "***input.token***"

WORKFLOW = """
version: 1
inputs:
  token: {secret: true}
servers:
  s: {command: [fake]}
steps:
  files:
    server: s
    tool: listing
    args: {n: 6}
  notes:
    server: s
    tool: echo
    args: {text: "hello"}
  convert:
    server: s
    tool: mixed
    for_each: ${{ steps.files.json }}
    timeout: 5s
    args: {text: "${{ item }}"}
  report:
    server: s
    tool: echo
    needs: [convert, notes]
    args: {text: "done"}
"""


def mixed_tools(server: FakeServer) -> None:
    echo_tools(server)

    async def mixed(call: FakeCall) -> dict[str, Any]:
        text = str(call.arguments.get("text"))
        if text in ("f1", "f4"):
            return text_result("disk full\nwhile writing", is_error=True)
        if text == "f2":
            return text_result(f"cannot convert {text} <b>&</b>", is_error=True)
        if text == "f3":
            await trio.sleep(100)
        return text_result(text.upper())

    server.tools["mixed"] = mixed


async def _events() -> list[dict[str, Any]]:
    harness = Harness({"s": mixed_tools})
    harness.undelivered_calls = 1
    events: list[dict[str, Any]] = []
    await run_plan(plan_of(WORKFLOW, token="s3cret"), harness, events=events, concurrency=4)
    return events


EPOCH: Final = datetime(2026, 12, 3, 12, tzinfo=UTC)
"""When the run of :func:`write_run` starts: its records are timed on trio's virtual clock from here, so the
report's times (durations, waits, buckets) are the run's own, the same on every machine."""


def _virtual_now() -> str:
    moment = EPOCH + timedelta(seconds=trio.current_time())
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def write_run(state_dir: Path, workflow: Path | None = None, fingerprints: dict[str, str] | None = None) -> Path:
    """The run's directory in ``state_dir`` (``runs/RUN_ID/journal.jsonl``), its journal framed by the records
    the lifecycle writes around the scheduler's: ``run_started`` (``workflow``, default a file that is not there,
    and the steps' ``fingerprints``) and ``run_stopped`` (in doubt)."""
    with pytest.MonkeyPatch.context() as patch:  # records timed by the virtual clock the run keeps, from EPOCH
        patch.setattr(writer, "_now", _virtual_now)
        events = trio.run(_events, clock=trio.testing.MockClock(autojump_threshold=0))
    first_ts = events[0]["ts"]
    start = {
        "seq": 0,
        "ts": first_ts,
        "type": "run_started",
        "run_id": RUN_ID,
        "workflow": str(workflow or "/srv/report.yaml"),
        "workflow_hash": "h",
        "inputs": {"token": SECRET_INPUT, "lang": "en"},
        "fingerprints": fingerprints or {},
        "pid": 1,
        "journal": JOURNAL_FORMAT,
    }
    stop = {"ts": events[-1]["ts"], "type": "run_stopped", "status": "in-doubt", "exit_code": 5}
    run = state_dir / "runs" / RUN_ID
    run.mkdir(parents=True)
    lines = [start, *events, stop]
    with (run / "journal.jsonl").open("w") as f:
        for seq, obj in enumerate(lines, start=1):
            f.write(json.dumps({**obj, "seq": seq}) + "\n")
    return run


def write_run_of_file(folder: Path, text: str = WORKFLOW) -> Path:
    """:func:`write_run` of the workflow written as ``folder/report.yaml`` (``text``: the run's, or one that
    renders other arguments), with the fingerprints a run of it journals (what ``show --item`` compares before
    rendering arguments again)."""
    from runner.workflow.fingerprints import fingerprints
    from runner.workflow.loader import validate

    path = folder / "report.yaml"
    path.write_text(text)
    plan = validate(str(path), inputs_file={"token": "s3cret"})
    return write_run(folder / "state", path, fingerprints(plan, dict(plan.input_values or {})))


# A fan-out resumed after a crash: of its four items, one was reused from the first attempt, one was in doubt and
# its reconcile tool said the call happened (reconciled), and two were called: what each step table counts.
SETTLED: list[dict[str, Any]] = [
    {"type": "run_started"},
    {"type": "step_started", "step": "convert", "items": 4},
    {"type": "item_dispatched", "step": "convert", "item": "f1", "index": 0},
    {"type": "item_succeeded", "step": "convert", "item": "f1", "index": 0},
    {"type": "item_dispatched", "step": "convert", "item": "f2", "index": 1},
    {"type": "run_resumed"},  # the first process died with f2 in flight: in doubt
    {"type": "step_started", "step": "convert", "items": 4, "reused": 1},
    {"type": "item_reconciled", "step": "convert", "item": "f2", "verdict": "done"},
    {"type": "item_dispatched", "step": "convert", "item": "f3", "index": 2},
    {"type": "item_succeeded", "step": "convert", "item": "f3", "index": 2},
    {"type": "item_dispatched", "step": "convert", "item": "f4", "index": 3},
    {"type": "item_succeeded", "step": "convert", "item": "f4", "index": 3},
    {"type": "step_finished", "step": "convert", "status": "succeeded"},
    {"type": "run_finished"},
]
