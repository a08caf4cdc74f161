"""Bounded journals (runner.engine.journal.notes): a flood of progress and log notifications per call, on trio's
virtual clock, makes a journal of bounded size; every count adds up; a resume cut in the middle of a flood
is still right."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import trio

from runner.engine.core.events import Entry, LogMessage, ProgressNoted
from runner.engine.core.state import RunState
from runner.engine.journal.notes import LOG_LIMIT, Notes
from runner.engine.journal.writer import EventLog
from runner.protocol.jsonrpc import Notification
from runner.protocol.mcp import LogMessage as McpLogMessage
from runner.protocol.mcp import Progress
from runner.view.plain import PlainView
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, Resume, plan_of, run_plan
from tests.support import entries

N = 5_000  # notifications of each kind per call
STEP_SECONDS = 0.04  # the fake server's pause after every 100 notifications: a call lasts 2 s of virtual time

FLOOD = """
version: 1
servers:
  s: {command: [fake]}
steps:
  each:
    server: s
    tool: flood
    for_each: [a, b, c]
    args: {text: "${{ item }}"}
"""


def flooding(server: FakeServer) -> None:
    """Tool ``flood``: N progress notifications and N log messages (on the call's stream), then its text."""

    async def flood(call: FakeCall) -> dict[str, Any]:
        for i in range(N):
            await call.progress(i + 1, N)
            params = {"level": "warning", "data": f"line {i} of {call.arguments['text']}"}
            await server.end.send(Notification("notifications/message", params, related_request_id=call.request.id))
            if i % 100 == 99:
                await trio.sleep(STEP_SECONDS)
        await server.end.send(Notification("notifications/message", {"level": "info", "data": "unrelated"}))
        return text_result(str(call.arguments["text"]))

    server.tools["flood"] = flood


def item_events(events: list[dict[str, Any]], kind: str, item: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind and e.get("item") == item]


async def test_a_flood_makes_a_bounded_journal_whose_counts_add_up(autojump_clock: trio.abc.Clock) -> None:
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(FLOOD), Harness({"s": flooding}), events=events)
    assert outcome.status == "succeeded"
    size = sum(len(json.dumps(e)) + 1 for e in events)
    # 3 calls x 5,000 x 2 notifications: ~2 MB journaled one record each; now the first 1,000 log messages of
    # each item and a progress record per second of each call
    assert size < 3 * (LOG_LIMIT + 10) * 200, size
    for item in "abc":
        progress = item_events(events, "progress", item)
        assert 2 <= len(progress) <= 2 / 1.0 + 3  # one per interval of the 2 s call, its first and its last
        # each record stands for itself and the ones folded into it
        assert sum(1 + p.get("folded", 0) for p in progress) == N
        (result,) = item_events(events, "item_succeeded", item)
        assert progress[-1]["progress"] == N and progress[-1]["seq"] < result["seq"]  # the last, before the result
        logs = item_events(events, "log", item)
        assert len(logs) == LOG_LIMIT + 1
        assert [e["data"] for e in logs[:2]] == [f"line 0 of {item}", f"line 1 of {item}"]
        more = logs[-1]
        assert more["logger"] == "mcp-run" and more["omitted"] == N - LOG_LIMIT and more["level"] == "warning"
        assert more["data"] == f"{N - LOG_LIMIT} more log messages, left out of the journal (the first 1000 are in it)"
        assert more["seq"] < result["seq"]
    unrelated = [e for e in events if e["type"] == "log" and "item" not in e]
    assert [e["data"] for e in unrelated] == ["unrelated"] * 3  # under the server's own cap


async def test_the_console_of_a_flood_is_bounded_too(autojump_clock: trio.abc.Clock) -> None:
    out = io.StringIO()
    state = RunState()
    view = PlainView(out, state, log_level="info", progress=False)

    def observe(entry: Entry) -> None:
        state.apply(entry)
        view.observe(entry)

    harness = Harness({"s": flooding})
    lines: list[dict[str, Any]] = []
    await run_plan(plan_of(FLOOD), harness, events=lines)
    for entry in entries(lines):
        observe(entry)
    printed = out.getvalue().splitlines()
    assert len(printed) <= 3 * (LOG_LIMIT + 1) + 3 + 10, len(printed)
    assert sum("more log messages, left out of the journal" in line for line in printed) == 3


async def test_a_resume_cut_in_the_middle_of_a_flood_calls_only_what_did_not_finish(
    autojump_clock: trio.abc.Clock,
) -> None:
    plan = plan_of(FLOOD.replace("[a, b, c]", "[a, b, c, d]"))
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": flooding}), events=events, concurrency=2)
    # the crash: the journal ends in the middle of c's and d's floods (a and b succeeded)
    done = [e["seq"] for e in events if e["type"] == "item_succeeded"]
    cut_at = next(e["seq"] for e in events if e["type"] == "progress" and e["item"] in "cd" and e["seq"] > done[1])
    cut = [e for e in events if e["seq"] <= cut_at + 3]
    assert {e["item"] for e in cut if e["type"] == "item_succeeded"} == {"a", "b"}
    harness = Harness({"s": flooding})
    outcome = await run_plan(plan, harness, prior=Resume(events=cut, in_doubt="rerun"))
    assert outcome.status == "succeeded"
    assert sorted(c.params["arguments"]["text"] for c in harness.calls("s") if c.method == "tools/call") == ["c", "d"]
    assert outcome.steps["each"].reused == 2


async def test_progress_left_waiting_by_a_burst_is_journaled_during_the_silence_after_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    def bursty(server: FakeServer) -> None:
        async def burst(call: FakeCall) -> dict[str, Any]:
            for i in range(1, 6):
                await call.progress(i, 6)
            await trio.sleep(5)  # silence: the last of the burst must not wait for the next notification
            await call.progress(6, 6)
            return text_result("done")

        server.tools["burst"] = burst

    text = FLOOD.replace("tool: flood", "tool: burst").replace("[a, b, c]", "[a]")
    events: list[dict[str, Any]] = []
    await run_plan(plan_of(text), Harness({"s": bursty}), events=events)
    progress = [(e["progress"], e.get("folded")) for e in events if e["type"] == "progress"]
    assert progress == [(1, None), (5, 3), (6, None)]


# -- the gate alone ------------------------------------------------------------------------------------------


def gate(interval: float = 1.0, limit: int | None = 3) -> tuple[Notes, list[Any]]:
    log = EventLog(None)
    seen: list[Any] = []
    log.subscribe(lambda entry: seen.append(entry.event))
    return Notes(log, progress_interval=interval, log_limit=limit), seen


async def test_progress_waiting_at_the_end_of_a_burst_is_written_when_its_interval_is_over(
    autojump_clock: trio.abc.Clock,
) -> None:
    notes, seen = gate()
    async with trio.open_nursery() as nursery:
        notes.attach(nursery)
        tally = notes.tally("s", "k")
        for i in range(5):
            notes.progress(tally, Progress(progress=i))
        assert [(e.progress, e.folded) for e in seen] == [(0, None)]  # the first at once, the rest wait
        await trio.sleep(0.999)
        assert len(seen) == 1  # not before its interval is over
        await trio.sleep(1.0)  # within two intervals, with no further notification
        assert [(e.progress, e.folded) for e in seen] == [(0, None), (4, 3)]
        await trio.sleep(5)
        notes.progress(tally, Progress(progress=5))  # its interval is over: at once
        notes.progress(tally, Progress(progress=6))  # waits; the writer, ended once none waited, starts again
        await trio.sleep(2)
        assert [(e.progress, e.folded) for e in seen[2:]] == [(5, None), (6, None)]
    notes.close()  # the nursery ended: the writer had ended by itself


@pytest.mark.parametrize("interval", [0.0, 1.0])
async def test_settle_writes_the_last_progress_and_the_log_count(
    autojump_clock: trio.abc.Clock, interval: float
) -> None:
    notes, seen = gate(interval)
    tally = notes.tally("s", "k")
    for i in range(4):
        notes.progress(tally, Progress(progress=i))
        notes.log("srv", ("s", "k"), McpLogMessage(level="error" if i == 3 else "debug", data=i))
    notes.settle("s", "k")
    progress = [e for e in seen if isinstance(e, ProgressNoted)]
    logs = [e for e in seen if isinstance(e, LogMessage)]
    if interval:
        assert [(e.progress, e.folded) for e in progress] == [(0, None), (3, 2)]
    else:  # no coalescing: every notification is journaled
        assert [(e.progress, e.folded) for e in progress] == [(0, None), (1, None), (2, None), (3, None)]
    assert [e.data for e in logs[:3]] == [0, 1, 2]
    assert (logs[3].omitted, logs[3].level, logs[3].logger, logs[3].item) == (1, "error", "mcp-run", "k")
    notes.close()
    assert len(seen) == len(progress) + len(logs)  # nothing left to write


async def test_messages_of_no_call_keep_a_burst_then_a_rate_with_each_gap_marked(
    autojump_clock: trio.abc.Clock,
) -> None:
    notes, seen = gate(limit=10)  # a burst of 10, then 100 a second (LOG_RATE)
    for i in range(50):  # a flood: 50 at once
        notes.log("srv", None, McpLogMessage(level="info", data=i))
    assert [e.data for e in seen] == list(range(10))
    await trio.sleep(0.05)  # 5 more allowed
    for i in range(50, 60):
        notes.log("srv", None, McpLogMessage(level="warning" if i == 58 else "info", data=i))
    gap = seen[10]
    assert (gap.omitted, gap.logger, gap.level, gap.item) == (40, "mcp-run", "info", None)
    assert gap.data == "40 log messages left out of the journal (past the first 10, 100 a second are kept)"
    assert [e.data for e in seen[11:]] == [50, 51, 52, 53, 54]
    await trio.sleep(0.05)  # 5 more allowed, but a gap record was written less than a second ago
    for i in range(60, 70):
        notes.log("srv", None, McpLogMessage(level="info", data=i))
    assert [e.data for e in seen[16:]] == [60, 61, 62, 63, 64]
    await trio.sleep(10)  # quiet: the budget refills, up to its burst
    notes.close()
    assert (seen[-1].omitted, seen[-1].level) == (10, "warning")  # 55..59 (one a warning) and 65..69
    for i in range(12):
        notes.log("srv", None, McpLogMessage(level="info", data=i))
    assert len([e for e in seen[22:] if e.omitted is None]) == 10


def test_no_log_limit_journals_every_message() -> None:
    notes, seen = gate(limit=None)
    for i in range(10):
        notes.log("srv", None, McpLogMessage(level="info", data=i))
    notes.close()
    assert [e.data for e in seen] == list(range(10))
