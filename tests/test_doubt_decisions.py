"""Decisions about items in doubt are journal events: durable before they act, scoped to the items they name.

The scenario of issue 25: a run leaves f0 and f1 in doubt; ``--skip-in-doubt`` settles them, and the resume
that carries the decision out is cut while f2 is in flight; a later ``--rerun-in-doubt`` calls f2 again, never
f0 or f1. And the third decision, ``--accept-in-doubt``: the calls happened, the items count as done.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from runner.engine.core.outcome import RERUN_PENDING
from runner.engine.core.state import RunState
from runner.engine.core.vocabulary import Decision, ItemStatus
from runner.exitcodes import ExitCode
from tests.fakes.server import FakeCall, FakeServer
from tests.harness import CHAIN, Harness, Resume, echo_tools, plan_of, run_plan
from tests.support import entry, folded


def _converted(harness: Harness) -> list[str]:
    """The items of step ``convert`` the harness's servers were called for, in order."""
    return [c.params["arguments"]["text"] for c in harness.calls("s") if c.params["name"] == "upper"]


def _dispatched(events: list[dict[str, Any]]) -> list[str]:
    return [e["item"] for e in events if e["type"] == "item_dispatched" and e["step"] == "convert"]


def _cut_after_dispatch(events: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``events`` up to the ``n``-th dispatch of a ``convert`` item (a crash right after it), without any
    ``convert`` result: every item of ``convert`` dispatched by then is in doubt."""
    seen = 0
    out = []
    for event in events:
        if event["type"] in ("item_succeeded", "item_failed") and event["step"] == "convert":
            continue
        out.append(event)
        if event["type"] == "item_dispatched" and event["step"] == "convert":
            seen += 1
            if seen == n:
                return out
    raise AssertionError(f"fewer than {n} dispatches")


async def _two_in_doubt() -> list[dict[str, Any]]:
    """A journal whose run crashed with f0 and f1 of ``convert`` in doubt."""
    events: list[dict[str, Any]] = []
    await run_plan(plan_of(CHAIN), Harness({"s": echo_tools}), events=events, concurrency=1)
    return _cut_after_dispatch(events, 2)


async def _resume(
    journal: list[dict[str, Any]], in_doubt: str = "ask", setup: Callable[[FakeServer], None] = echo_tools, **kw: Any
) -> tuple[Any, Harness, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    harness = Harness({"s": setup})
    prior = Resume(events=journal, in_doubt=in_doubt)
    outcome = await run_plan(plan_of(CHAIN), harness, prior=prior, events=events, **kw)
    return outcome, harness, journal + events


async def test_a_skip_survives_a_crash_and_a_later_rerun_calls_only_what_is_in_doubt_now(
    autojump_clock: trio.abc.Clock,
) -> None:
    journal = await _two_in_doubt()
    outcome, _harness, _ = await _resume(journal)
    assert outcome.blocked and sorted(d["item"] for d in outcome.in_doubt) == ["f0", "f1"]

    # --skip-in-doubt, cut while f2 is in flight.
    _outcome, harness, after = await _resume(journal, "skip", concurrency=1)
    assert _converted(harness) == ["f2", "f3"]
    decisions = [e for e in after if e["type"] == "doubt_decided"]
    assert decisions == [{**decisions[0], "step": "convert", "keys": ["f0", "f1"], "decision": "skip"}]
    crashed = _cut_after_dispatch(after, 3)  # f0, f1 (first attempt), then f2 (the skip's resume)

    outcome, harness, _ = await _resume(crashed)  # the next exit 5 lists f2 only
    assert outcome.blocked and [d["item"] for d in outcome.in_doubt] == ["f2"]
    assert _converted(harness) == []

    outcome, harness, final = await _resume(crashed, "rerun")  # "call them again": f2, never f0 or f1
    assert sorted(_converted(harness)) == ["f2", "f3"]
    assert _dispatched(final).count("f0") == 1 and _dispatched(final).count("f1") == 1
    assert sorted(f["item"] for f in outcome.failures) == ["f0", "f1"]
    assert {f["kind"] for f in outcome.failures} == {"skipped-in-doubt"}


async def test_accept_records_the_items_as_done_and_their_dependents_run(autojump_clock: trio.abc.Clock) -> None:
    journal = await _two_in_doubt()
    outcome, harness, after = await _resume(journal, "accept")
    assert sorted(_converted(harness)) == ["f2", "f3"]  # f0 and f1 happened: not called again
    assert outcome.status == "succeeded" and outcome.exit_code == ExitCode.OK
    assert [c.params["name"] for c in harness.calls("s")][-1] == "echo"  # the step after them ran
    state = folded(after)
    for key in ("f0", "f1"):
        item = state.item("convert", key)
        assert item is not None and item.status is ItemStatus.SUCCEEDED and item.decided is Decision.ACCEPT
        assert item.result is None
    assert state.step("convert").counts(live=False).succeeded == 4


@pytest.mark.parametrize("decision", ["skip", "rerun", "accept"])
async def test_a_crash_at_any_point_of_a_decision_keeps_it(decision: str, autojump_clock: trio.abc.Clock) -> None:
    journal = await _two_in_doubt()
    _outcome, _harness, after = await _resume(journal, decision, concurrency=1)
    at = next(i for i, e in enumerate(after) if e["type"] == "doubt_decided")
    for cut in range(len(journal), len(after) + 1):
        prefix = after[:cut]
        outcome, harness, final = await _resume(prefix)  # a plain resume (a crontab's --resume) after the crash
        later = _dispatched(final[at:])
        if cut <= at:  # the decision never reached the journal: nothing was decided, the run asks again
            assert outcome.blocked and _converted(harness) == []
            continue
        for key in ("f0", "f1"):
            if decision == "rerun":
                # Called at most once after the decision (by the attempt that carried it out, or by this
                # resume); when a rerun cut in flight blocks this resume, what was not rerun yet keeps its mark.
                assert later.count(key) <= 1, (cut, key)
                item = folded(final).item("convert", key)
                assert item is not None
                assert later.count(key) == 1 or (outcome.blocked and item.decided is Decision.RERUN), (cut, key)
                if later.count(key) == 0:  # listed among those in doubt, saying that a resume calls it again
                    [listed] = [d for d in outcome.in_doubt if d["item"] == key]
                    assert listed["error"].endswith(RERUN_PENDING)
            else:
                assert later.count(key) == 0, (cut, key)
        if decision != "rerun":
            assert not any(d["item"] in ("f0", "f1") for d in outcome.in_doubt)


async def test_the_decision_is_durable_before_any_call(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    journal = await _two_in_doubt()
    path = tmp_path / "journal.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    synced: list[str] = [""]  # the journal as of each fsync

    async def offload(write: Callable[..., None], data: bytes, sync: bool) -> None:
        write(data, sync)
        if sync:
            synced.append(path.read_text())

    durable_at_call: list[str] = []

    def setup(server: FakeServer) -> None:
        echo_tools(server)
        upper = server.tools["upper"]

        async def watched(call: FakeCall) -> dict[str, Any]:
            durable_at_call.append(synced[-1])
            return await upper(call)

        server.tools["upper"] = watched

    try:
        await _resume(journal, "rerun", setup=setup, journal_fd=fd, offload=offload)
    finally:
        os.close(fd)
    assert len(durable_at_call) == 4
    assert all('"type":"doubt_decided"' in text for text in durable_at_call)


def test_a_decision_acts_only_on_items_still_in_doubt() -> None:
    state: RunState = folded(
        [
            {"type": "item_dispatched", "step": "s", "item": "a"},
            {"type": "item_succeeded", "step": "s", "item": "a", "result": {"content": []}},
            {"type": "item_dispatched", "step": "s", "item": "b"},
            {"type": "doubt_decided", "step": "s", "keys": ["a", "b", "zz"], "decision": "skip"},
            {"type": "item_dispatched", "step": "s", "item": "c"},
            {"type": "doubt_decided", "step": "s", "keys": ["c"], "decision": "rerun"},
            {"type": "doubt_decided", "step": "s", "keys": ["c"], "decision": "a-later-version"},
        ]
    )
    a, b, c = (state.item("s", key) for key in "abc")
    assert a is not None and a.status is ItemStatus.SUCCEEDED and a.decided is None
    assert b is not None and b.status is ItemStatus.SKIPPED and b.decided is Decision.SKIP
    assert c is not None and c.in_doubt and c.decided is Decision.RERUN
    assert state.item("s", "zz") is None
    state.apply(entry({"type": "item_dispatched", "step": "s", "item": "c"}, seq=99))
    assert c.decided is None  # dispatched again: the decision was carried out; a new doubt needs a new one
