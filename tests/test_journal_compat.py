"""A journal written before a change still reads and resumes after it (issue 26: the engine was rebuilt around
a shared step machine and typed events; the format on disk did not change).

``tests/fixtures/journal-format-3.jsonl`` was written by mcp-run at commit 2377d9d (journal format 3), by the
generator at the bottom of this file, and is never rewritten: a run of :data:`WORKFLOW` in which ``convert``'s
items f0 and f1 succeeded, f2's call was dispatched and its answer lost (in doubt), f3 failed with a tool
error, and ``report`` has not run: the crash came after f3's failure record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from runner.engine.core.events import decode, encode
from runner.engine.core.state import RunState
from runner.engine.core.vocabulary import ItemStatus
from runner.engine.journal.reader import parse_journal
from runner.exitcodes import ExitCode
from tests.harness import Harness, Resume, echo_tools, plan_of, run_plan

FIXTURE = Path(__file__).parent / "fixtures" / "journal-format-3.jsonl"

WORKFLOW = """
version: 1
servers:
  s: {command: [fake]}
steps:
  convert:
    server: s
    tool: upper
    for_each: ["f0", "f1", "f2", "f3"]
    args: {text: "${{ item }}"}
  report:
    server: s
    tool: echo
    args: {text: "${{ join(',', steps.convert.results[?status == 'succeeded'].structured.value) }}"}
outputs:
  report: ${{ steps.report.text }}
"""


def lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def test_every_record_of_the_old_journal_decodes_and_encodes_back_the_same() -> None:
    for record in lines():
        assert encode(decode(record)) == record


def test_the_old_journal_folds_to_what_it_recorded() -> None:
    state = RunState()
    for entry in parse_journal(FIXTURE.read_bytes())[0]:
        state.apply(entry)
    items = state.step("convert").items
    assert {key: item.status for key, item in items.items()} == {
        "f0": ItemStatus.SUCCEEDED,
        "f1": ItemStatus.SUCCEEDED,
        "f2": ItemStatus.DISPATCHED,
        "f3": ItemStatus.FAILED,
    }
    assert [key for _, item in state.in_doubt() for key in [item.key]] == ["f2"]


async def test_the_old_journal_resumes_calling_only_what_it_left(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(WORKFLOW.replace("upper", "upper_or_fail"))
    # Without a decision the resume stops before any call: f2 may have run.
    harness = Harness({"s": _tools})
    blocked = await run_plan(plan, harness, prior=Resume(events=lines()))
    assert blocked.exit_code == ExitCode.OUTCOME_UNKNOWN
    assert harness.calls("s") == []
    # Rerun: f2 is called again (it is decided), f3 too (it failed), f0 and f1 are reused, report runs.
    harness = Harness({"s": _tools})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan, harness, prior=Resume(events=lines(), in_doubt="rerun"), events=events)
    called = sorted(
        str(call.params["arguments"]["text"]) for call in harness.calls("s") if call.params["name"] != "tools/list"
    )
    assert called == sorted(["f2", "f3", "F0,F1,F2,F3"])
    assert outcome.exit_code == ExitCode.OK
    assert outcome.outputs == {"report": "F0,F1,F2,F3"}
    decided = [e for e in events if e["type"] == "doubt_decided"]
    assert decided == [{**decided[0], "step": "convert", "keys": ["f2"], "decision": "rerun"}]


def _tools(server: Any) -> None:
    echo_tools(server)
    server.tools["upper_or_fail"] = server.tools["upper"]


async def _generate() -> None:  # run by hand, once, at the commit the fixture names
    """Write the fixture: the whole run, then the journal cut as the crash left it (f2's answer lost)."""
    failing = {"f3"}

    def tools(server: Any) -> None:
        echo_tools(server)
        upper = server.tools["upper"]

        async def upper_or_fail(call: Any) -> dict[str, Any]:
            if call.arguments.get("text") in failing:
                return await server.tools["fail"](call)
            return dict(await upper(call))

        server.tools["upper_or_fail"] = upper_or_fail

    events: list[dict[str, Any]] = []
    plan = plan_of(WORKFLOW.replace("upper", "upper_or_fail"))
    await run_plan(plan, Harness({"s": tools}), events=events, concurrency=1)
    started = {
        "seq": 1,
        "ts": events[0]["ts"],
        "type": "run_started",
        "run_id": "20261202T150000-abcdef",
        "workflow": "/work/wf.yaml",
        "journal": 3,
    }
    started = encode(decode(started))
    kept: list[dict[str, Any]] = [started]
    for event in events:
        if event["type"] == "item_succeeded" and event.get("item") == "f2":
            continue  # the answer the crash lost
        if event["type"] in ("step_finished", "run_finished") or event.get("step") == "report":
            continue
        kept.append({**event, "seq": len(kept) + 1})
    FIXTURE.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in kept))


if __name__ == "__main__":
    trio.run(_generate)
