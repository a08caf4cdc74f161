"""The scheduler on scripted fake servers over memory transports, on trio's virtual clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from runner.engine.core.state import RunState
from runner.engine.scheduler import Scheduler
from runner.errors import OutcomeUnknown
from runner.exitcodes import ExitCode
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import CHAIN, Harness, Resume, echo_tools, plan_of, run_plan
from tests.support import folded


def count_tasks(task: trio.lowlevel.Task) -> int:
    return 1 + sum(count_tasks(child) for nursery in task.child_nurseries for child in nursery.child_tasks)


def fold(events: list[dict[str, Any]]) -> RunState:
    return folded(events)


async def test_chain_with_fanout_and_outputs(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": echo_tools})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(CHAIN), harness, events=events)
    assert outcome.status == "succeeded" and outcome.exit_code == ExitCode.OK
    assert outcome.outputs == {"report": "F0,F1,F2,F3", "count": 4}
    assert harness.opened == ["s"]  # one session shared by every step
    assert outcome.steps["convert"].counts()["succeeded"] == 4
    types = [e["type"] for e in events]
    assert types.count("item_dispatched") == 6 and types.count("item_succeeded") == 6
    # every dispatch is journaled before its success
    for e in events:
        if e["type"] == "item_succeeded":
            dispatched = [d for d in events if d["type"] == "item_dispatched" and d["item"] == e["item"]]
            assert dispatched and dispatched[0]["seq"] < e["seq"]


async def test_failed_item_does_not_stop_siblings_and_skips_dependents(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  items: {type: array, default: [a, b, c]}
steps:
  each:
    server: s
    tool: picky
    for_each: ${{ inputs.items }}
    args: {text: "${{ item }}"}
  after:
    server: s
    tool: echo
    args: {text: "${{ steps.each.status }}"}
"""

    def setup(server: FakeServer) -> None:
        echo_tools(server)

        async def picky(call: FakeCall) -> dict[str, Any]:
            return text_result("no", is_error=True) if call.arguments["text"] == "b" else text_result("ok")

        server.tools["picky"] = picky

    harness = Harness({"s": setup})
    outcome = await run_plan(plan_of(text), harness)
    assert outcome.steps["each"].counts() == {
        "total": 3,
        "succeeded": 2,
        "failed": 1,
        "in_doubt": 0,
        "skipped": 0,
        "reused": 0,
    }
    assert outcome.steps["after"].status == "skipped"
    assert outcome.exit_code == ExitCode.FAILED
    assert [f["kind"] for f in outcome.failures] == ["tool-error"]
    assert len(harness.calls("s")) == 3


async def test_continue_on_error_lets_dependents_run(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  bad:
    server: s
    tool: fail
    args: {text: x}
    continue_on_error: true
  after:
    server: s
    tool: echo
    args: {text: "${{ steps.bad.status }}"}
outputs:
  after: ${{ steps.after.text }}
"""
    outcome = await run_plan(plan_of(text), Harness({"s": echo_tools}))
    assert outcome.steps["bad"].status == "failed"
    assert outcome.outputs == {"after": "failed"}
    assert outcome.exit_code == ExitCode.OK


async def test_if_false_skips_and_dependents_see_skipped(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  go: {type: boolean, default: false}
steps:
  maybe:
    server: s
    tool: echo
    if: ${{ inputs.go }}
    args: {text: x}
  next:
    server: s
    tool: echo
    args: {text: "${{ steps.maybe.text }}"}
"""
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(text), harness)
    assert outcome.steps["maybe"].status == "skipped"
    assert outcome.steps["next"].status == "skipped"
    assert harness.calls("s") == []
    assert harness.opened == []  # no step ran: no server was started
    assert outcome.exit_code == ExitCode.OK


async def test_failure_stops_new_steps_but_not_running_fanout(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  items: {type: array, default: [1, 2, 3, 4, 5, 6]}
steps:
  long:
    server: s
    tool: slow
    for_each: ${{ inputs.items }}
    concurrency: 2
    args: {seconds: 10}
  bad:
    server: s
    tool: fail
    args: {text: x}
  late:
    server: s
    tool: echo
    needs: [long]
    args: {text: y}
"""
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(text), harness)
    assert outcome.steps["long"].counts()["succeeded"] == 6  # the running fan-out went on
    assert outcome.steps["late"].status == "skipped"
    assert "bad" in (outcome.steps["late"].reason or "")


@pytest.mark.parametrize(("max_concurrency", "run_concurrency", "expected"), [(3, 16, 3), (16, 4, 4)])
async def test_parallel_steps_share_the_servers_and_the_runs_limits(
    autojump_clock: trio.abc.Clock, max_concurrency: int, run_concurrency: int, expected: int
) -> None:
    in_flight = peak = 0

    def setup(server: FakeServer) -> None:
        async def work(call: FakeCall) -> dict[str, Any]:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await trio.sleep(1)
            in_flight -= 1
            return text_result("ok")

        server.tools["work"] = work

    steps = "".join(
        f"  {name}:\n    server: s\n    tool: work\n    for_each: ${{{{ inputs.items }}}}\n    args: {{i: 1}}\n"
        for name in ("a", "b", "c")
    )
    text = f"version: 1\nservers:\n  s: {{command: [fake], max_concurrency: {max_concurrency}}}\n"
    text += "inputs:\n  items: {type: array, default: [1, 2, 3, 4, 5, 6, 7, 8]}\nsteps:\n" + steps
    outcome = await run_plan(plan_of(text), Harness({"s": setup}), concurrency=run_concurrency)
    assert all(outcome.steps[name].counts()["succeeded"] == 8 for name in "abc")
    assert peak == expected  # three steps of 8 items at once, each step bounded only by the shared limits


async def test_fanout_concurrency_bounded_and_no_task_per_item(autojump_clock: trio.abc.Clock) -> None:
    in_flight = 0
    peak = 0

    def setup(server: FakeServer) -> None:
        async def work(call: FakeCall) -> dict[str, Any]:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await trio.sleep(1)
            in_flight -= 1
            return text_result("ok")

        server.tools["work"] = work

    text = """
version: 1
servers:
  s: {command: [fake], max_concurrency: 8}
inputs:
  n: {type: integer, default: 500}
steps:
  many:
    server: s
    tool: work
    for_each: ${{ inputs.items }}
    concurrency: 5
    args: {i: "${{ index }}"}
"""
    text = text.replace("  n: {type: integer, default: 500}", "  items: {type: array, default: []}")
    plan = plan_of(text, items="[" + ",".join(str(i) for i in range(500)) + "]")
    tasks_seen = 0

    async def control(scheduler: Scheduler) -> None:
        nonlocal tasks_seen
        await trio.sleep(2.5)
        tasks_seen = count_tasks(trio.lowlevel.current_root_task())

    start = trio.current_time()
    outcome = await run_plan(plan, Harness({"s": setup}), control=control)
    assert outcome.steps["many"].counts()["succeeded"] == 500
    assert peak == 5
    assert trio.current_time() - start == pytest.approx(100, abs=1)  # 500 items / 5 at a time, 1 s each
    assert 5 < tasks_seen < 50  # five workers and a few session tasks, not 500


async def test_duplicate_keys_fail_the_step_naming_both_indexes(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  items: {type: array, default: [a, b, a]}
steps:
  each:
    server: s
    tool: echo
    for_each: ${{ inputs.items }}
    args: {text: "${{ item }}"}
"""
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(text), harness)
    assert outcome.steps["each"].status == "failed"
    assert "items 0 and 2" in (outcome.steps["each"].reason or "")
    assert harness.calls("s") == []


async def test_unreferenced_fanout_results_are_not_kept(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  items: {type: array, default: [a, b, c]}
steps:
  each:
    server: s
    tool: echo
    for_each: ${{ inputs.items }}
    args: {text: "${{ item }}"}
"""
    plan = plan_of(text)
    assert plan.steps["each"].referenced is False
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan, Harness({"s": echo_tools}), events=events)
    assert outcome.status == "succeeded"
    # the journal still has every result
    assert sorted(e["result"]["content"][0]["text"] for e in events if e["type"] == "item_succeeded") == ["a", "b", "c"]


async def test_server_that_cannot_start_leaves_the_run_incomplete(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": echo_tools})
    harness.fail_open.add("s")
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(CHAIN), harness, events=events)
    assert (outcome.exit_code, outcome.status) == (ExitCode.UNREACHABLE, "incomplete")  # open: a resume runs it
    assert outcome.steps["files"].status == "incomplete"
    assert outcome.steps["convert"].status == "skipped"
    assert not any(e["type"].startswith("item_") for e in events)  # nothing was dispatched
    assert [e["type"] for e in events if e["type"] == "session_failed"] == ["session_failed"]


def _dropping(server: FakeServer, *, written: bool) -> None:
    """A server whose first call's connection breaks; later calls work."""
    echo_tools(server)
    attempts = {"n": 0}

    async def flaky(call: FakeCall) -> dict[str, Any] | None:
        attempts["n"] += 1
        if attempts["n"] == 1:
            from runner.transports.base import RequestLost

            await call.server.end.send(RequestLost(call.request.id, OutcomeUnknown("stream dropped")))
            return None
        return text_result("ok")

    server.tools["flaky"] = flaky


FLAKY = """
version: 1
servers:
  s: {command: [fake]}
steps:
  once:
    server: s
    tool: flaky
    args: {}
    idempotent: IDEMPOTENT
"""


async def test_a_server_that_stops_answering_after_initialize_gets_no_call_and_the_run_stays_open(
    autojump_clock: trio.abc.Clock,
) -> None:
    text = """
version: 1
servers:
  s: {command: [fake], connect_timeout: 2s, reconnect: 10s}
steps:
  one: {server: s, tool: echo, args: {text: a}}
  two: {server: s, tool: echo, for_each: [b, c], args: {text: "${{ item }}"}}
"""

    def deaf(server: FakeServer) -> None:
        echo_tools(server)
        server.deaf = True

    harness = Harness({"s": deaf})
    events: list[dict[str, Any]] = []
    start = trio.current_time()
    outcome = await run_plan(plan_of(text), harness, events=events)
    # tools/list got no answer: nothing was sent, so nothing is in doubt, and the run stays open (exit 4)
    assert (outcome.status, outcome.exit_code) == ("incomplete", ExitCode.UNREACHABLE)
    assert harness.calls("s") == [] and outcome.in_doubt == []
    assert not [e for e in events if e["type"] == "item_dispatched"]
    failed = [e for e in events if e["type"] == "item_failed"]
    assert sorted(e.get("item") for e in failed) == ["", "b", "c"]
    assert {e["kind"] for e in failed} == {"connection-before-send"}  # "not sent (no connection)"
    lost = [e for e in events if e["type"] == "session_lost"]
    assert lost and "the server answered nothing to tools/list" in lost[0]["error"]
    assert "the call was not sent" in lost[0]["error"]
    assert trio.current_time() - start < 2 + 10 + 5  # the connect timeout and the reconnect budget, no more


async def test_outcome_unknown_is_not_retried_unless_idempotent(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": lambda srv: _dropping(srv, written=True)})
    outcome = await run_plan(plan_of(FLAKY.replace("IDEMPOTENT", "false")), harness)
    assert len(harness.calls("s")) == 1
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    assert outcome.status == "in-doubt"
    assert [d["kind"] for d in outcome.in_doubt] == ["outcome-unknown"]

    harness = Harness({"s": lambda srv: _dropping(srv, written=True)})
    outcome = await run_plan(plan_of(FLAKY.replace("IDEMPOTENT", "true")), harness)
    assert len(harness.calls("s")) == 2
    assert outcome.exit_code == ExitCode.OK


async def test_resume_reuses_succeeded_items_and_runs_the_rest(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(CHAIN)
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": echo_tools}), events=events, concurrency=1)
    # keep the journal up to the second convert success: files done, 2 of 4 converted
    successes = [i for i, e in enumerate(events) if e["type"] == "item_succeeded"]
    cut = events[: successes[2] + 1]
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness, prior=Resume(events=cut))
    assert outcome.outputs == {"report": "F0,F1,F2,F3", "count": 4}
    assert [c.params["name"] for c in harness.calls("s")] == ["upper", "upper", "echo"]
    assert outcome.steps["convert"].reused == 2


async def test_resume_stops_on_unsafe_in_doubt_items(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(CHAIN)
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": echo_tools}), events=events, concurrency=1)
    # cut right after a convert dispatch: that item is in doubt
    dispatches = [i for i, e in enumerate(events) if e["type"] == "item_dispatched" and e["step"] == "convert"]
    cut = events[: dispatches[0] + 1]
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness, prior=Resume(events=cut))
    assert outcome.blocked and outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    assert [d["step"] for d in outcome.in_doubt] == ["convert"]
    assert harness.calls("s") == []

    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness, prior=Resume(events=cut, in_doubt="skip"))
    assert outcome.steps["convert"].counts()["failed"] == 1
    assert len([c for c in harness.calls("s") if c.params["name"] == "upper"]) == 3

    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness, prior=Resume(events=cut, in_doubt="rerun"))
    assert outcome.status == "succeeded"
    assert len([c for c in harness.calls("s") if c.params["name"] == "upper"]) == 4


async def test_drain_lets_inflight_finish_and_dispatches_nothing_new(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  items: {type: array, default: [1, 2, 3, 4, 5, 6, 7, 8]}
steps:
  long:
    server: s
    tool: slow
    for_each: ${{ inputs.items }}
    concurrency: 2
    args: {seconds: 10}
"""

    async def control(scheduler: Scheduler) -> None:
        await trio.sleep(15)
        scheduler.drain()

    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(text), harness, control=control)
    assert len(harness.calls("s")) == 4
    assert outcome.steps["long"].counts()["succeeded"] == 4
    assert outcome.status == "interrupted"


async def test_cancel_sends_cancelled_and_marks_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  long:
    server: s
    tool: slow
    args: {seconds: 100}
"""
    events: list[dict[str, Any]] = []

    async def control(scheduler: Scheduler) -> None:
        await trio.sleep(5)
        scheduler.cancel()

    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(text), harness, control=control, events=events)
    assert outcome.status == "interrupted"
    assert [e["kind"] for e in events if e["type"] == "item_failed"] == ["cancelled"]
    server = harness.servers["s"][0]
    assert server.cancelled == [server.calls[0].id]
    assert fold(events).in_doubt()[0][0] == "long"


async def test_undelivered_call_is_retried_with_backoff_and_journaled(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  once:
    server: s
    tool: echo
    args: {text: hi}
"""
    harness = Harness({"s": echo_tools})
    harness.undelivered_calls = 2
    events: list[dict[str, Any]] = []
    start = trio.current_time()
    outcome = await run_plan(plan_of(text), harness, events=events)
    assert outcome.status == "succeeded"
    assert len(harness.calls("s")) == 1  # only the delivered attempt reached the server
    # The server's link pings it after each loss: backoff 1 s, then 2 s (the call waits for it); the
    # session is kept (its connection still stands)
    assert trio.current_time() - start == pytest.approx(3)
    assert harness.opened == ["s"]
    kinds = [(e["type"], e.get("attempt") or e.get("kind")) for e in events if e.get("step") == "once"]
    assert kinds == [
        ("step_started", None),
        ("item_dispatched", 1),
        ("item_failed", "connection-before-send"),
        ("item_dispatched", 2),
        ("item_failed", "connection-before-send"),
        ("item_dispatched", 3),
        ("item_succeeded", None),
        ("step_finished", None),
    ]
    assert fold(events).steps["once"].items[""].status == "succeeded"


async def test_drain_during_backoff_records_no_failure(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  once:
    server: s
    tool: echo
    args: {text: hi}
"""
    harness = Harness({"s": echo_tools})
    harness.undelivered_calls = 1
    events: list[dict[str, Any]] = []

    async def control(scheduler: Scheduler) -> None:
        await trio.sleep(0.5)  # during the first backoff
        scheduler.drain()

    outcome = await run_plan(plan_of(text), harness, events=events, control=control)
    assert outcome.status == "interrupted" and harness.calls("s") == []
    assert [e["kind"] for e in events if e["type"] == "item_failed"] == ["connection-before-send"]
    assert outcome.failures == []  # the item did not run; a resume will run it


async def test_an_item_skipped_by_a_resume_stays_skipped(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(CHAIN)
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": echo_tools}), events=events, concurrency=1)
    dispatches = [i for i, e in enumerate(events) if e["type"] == "item_dispatched" and e["step"] == "convert"]
    cut = events[: dispatches[0] + 1]
    key = events[dispatches[0]]["item"]
    skipped = [*cut, {"seq": 999, "type": "item_failed", "step": "convert", "item": key, "kind": "skipped-in-doubt"}]
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness, prior=Resume(events=skipped))
    assert not outcome.blocked
    assert len([c for c in harness.calls("s") if c.params["name"] == "upper"]) == 3  # not the skipped one
    assert outcome.exit_code == ExitCode.FAILED
    assert [f["kind"] for f in outcome.failures] == ["skipped-in-doubt"]

    # A skip settles the item for good: a later --rerun-in-doubt (for other items) never calls it.
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness, prior=Resume(events=skipped, in_doubt="rerun"))
    assert len([c for c in harness.calls("s") if c.params["name"] == "upper"]) == 3
    assert [f["kind"] for f in outcome.failures] == ["skipped-in-doubt"]


async def test_an_unreadable_result_is_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    def setup(server: FakeServer) -> None:
        async def garbled(call: FakeCall) -> dict[str, Any]:
            return {"content": "not a list"}

        server.tools["garbled"] = garbled

    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  once: {server: s, tool: garbled, args: {}}
"""
    outcome = await run_plan(plan_of(text), Harness({"s": setup}))
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    assert [d["kind"] for d in outcome.in_doubt] == ["outcome-unknown"]


RESTART = """
version: 1
servers:
  s: {command: [fake], reconnect: RECONNECT}
inputs:
  items: {type: array, default: [1, 2, 3, 4, 5, 6, 7, 8]}
steps:
  long:
    server: s
    tool: slow
    for_each: ${{ inputs.items }}
    concurrency: 2
    idempotent: IDEMPOTENT
    args: {seconds: 10}
"""


def _kill_first_server_at(harness: Harness, when: float, *, keep_down: bool = False) -> Callable[[Scheduler], Any]:
    async def control(scheduler: Scheduler) -> None:
        await trio.sleep(when)
        if keep_down:
            harness.fail_open.add("s")
        harness.servers["s"][0].end.break_connection()

    return control


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_server_that_dies_mid_fanout_is_restarted(autojump_clock: trio.abc.Clock, idempotent: bool) -> None:
    text = RESTART.replace("IDEMPOTENT", str(idempotent).lower()).replace("RECONNECT", "1m")
    harness = Harness({"s": echo_tools})
    events: list[dict[str, Any]] = []
    # 2 at a time, 10 s each: at 15 s items 1-2 are done and 3-4 are in flight
    outcome = await run_plan(plan_of(text), harness, events=events, control=_kill_first_server_at(harness, 15))
    assert harness.opened == ["s", "s"]  # restarted once
    counts = outcome.steps["long"].counts()
    if idempotent:  # the two calls in flight are made again on the new server
        assert (outcome.status, counts["succeeded"], len(harness.calls("s"))) == ("succeeded", 8, 10)
    else:  # they may have run: in doubt, never sent again; the rest go to the new server
        assert (outcome.status, outcome.exit_code) == ("in-doubt", ExitCode.OUTCOME_UNKNOWN)
        assert (counts["succeeded"], counts["in_doubt"], len(harness.calls("s"))) == (6, 2, 8)
        first_server = {c.id for c in harness.servers["s"][0].calls}
        in_flight = {e["item"] for e in events if e["type"] == "item_dispatched" and e["request_id"] in first_server}
        assert {d["item"] for d in outcome.in_doubt} == in_flight - {
            e["item"] for e in events if e["type"] == "item_succeeded"
        }
    assert [e["type"] for e in events if e["type"].startswith("session_")] == [
        "session_opened",
        "session_lost",
        "session_retrying",
        "session_opened",
    ]
    assert len(fold(events).in_doubt()) == (0 if idempotent else 2)


async def test_a_server_that_stays_down_leaves_the_rest_undone(autojump_clock: trio.abc.Clock) -> None:
    text = RESTART.replace("IDEMPOTENT", "true").replace("RECONNECT", "20s")
    harness = Harness({"s": echo_tools})
    events: list[dict[str, Any]] = []
    control = _kill_first_server_at(harness, 15, keep_down=True)
    outcome = await run_plan(plan_of(text), harness, events=events, control=control)
    assert (outcome.status, outcome.exit_code) == ("incomplete", ExitCode.UNREACHABLE)
    assert outcome.steps["long"].status == "incomplete"
    state = fold(events)
    # items 1-2 succeeded; 3-4 were in flight (safe to repeat: waiting to be sent again); 5-8 not yet sent:
    # six definite "not delivered" failures, which a resume calls (none is in doubt)
    statuses = {
        key: (item.status.value, item.kind and item.kind.value) for key, item in state.steps["long"].items.items()
    }
    assert sorted(statuses.values(), key=str) == [("failed", "connection-before-send")] * 6 + [("succeeded", None)] * 2
    assert state.in_doubt() == []
    retry_waits = [e["delay_s"] for e in events if e["type"] == "session_retrying"]
    assert retry_waits == [1.0, 2.0, 4.0, 8.0]  # the next (16 s) would end past the 20 s budget
    assert [e["type"] for e in events if e["type"].startswith("session_")][-1] == "session_failed"


async def test_an_in_doubt_item_whose_step_does_not_run_keeps_the_run_open(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(CHAIN)
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": echo_tools}), events=events, concurrency=1)
    dispatches = [i for i, e in enumerate(events) if e["type"] == "item_dispatched" and e["step"] == "convert"]
    cut = events[: dispatches[0] + 1]  # a convert item in doubt
    # This time `files` fails (its listing is a tool error), so `convert` is skipped: its item in doubt was
    # neither decided nor called again, and must not let the run close as merely failed.
    files_failed = {"seq": 998, "type": "item_failed", "step": "files", "item": "", "kind": "tool-error", "error": "x"}
    broken = [*cut[: dispatches[0]], files_failed, cut[-1]]

    def failing_listing(server: FakeServer) -> None:
        echo_tools(server)
        server.tools["listing"] = server.tools["fail"]

    outcome = await run_plan(plan, Harness({"s": failing_listing}), prior=Resume(events=broken, in_doubt="rerun"))
    assert outcome.steps["convert"].status == "skipped"
    assert (outcome.status, outcome.exit_code) == ("in-doubt", ExitCode.OUTCOME_UNKNOWN)
    assert [d["step"] for d in outcome.in_doubt] == ["convert"]


async def test_a_server_that_answers_pings_but_never_takes_a_call_is_given_up(autojump_clock: trio.abc.Clock) -> None:
    text = RESTART.replace("IDEMPOTENT", "false").replace("RECONNECT", "30s").replace("seconds: 10", "seconds: 1")
    harness = Harness({"s": echo_tools})
    harness.undelivered_calls = 10**9  # every tools/call fails before a byte is written; pings work
    events: list[dict[str, Any]] = []
    start = trio.current_time()
    outcome = await run_plan(plan_of(text), harness, events=events)
    assert (outcome.status, outcome.exit_code) == ("incomplete", ExitCode.UNREACHABLE)
    assert trio.current_time() - start < 60  # bounded by the 30 s budget, not a loop
    assert harness.calls("s") == []
    assert [e["type"] for e in events].count("item_dispatched") < 30


async def test_a_call_refused_for_an_expired_session_is_journaled_then_sent_again(
    autojump_clock: trio.abc.Clock,
) -> None:
    harness = Harness({"s": echo_tools})
    harness.expired_calls = 1
    events: list[dict[str, Any]] = []
    outcome = await run_plan(
        plan_of(FLAKY.replace("IDEMPOTENT", "false").replace("flaky", "echo")), harness, events=events
    )
    assert outcome.status == "succeeded"
    kinds = [(e["type"], e.get("kind")) for e in events if e["type"].startswith("item_")]
    assert kinds == [
        ("item_dispatched", None),
        ("item_failed", "connection-before-send"),  # refused: the server forgot the session; not run
        ("item_dispatched", None),
        ("item_succeeded", None),
    ]
    assert len(harness.calls("s")) == 1


async def test_arguments_json_cannot_carry_fail_the_item_as_not_sent(autojump_clock: trio.abc.Clock) -> None:
    """A value JSON cannot carry (1e400 read by from_json is infinite) fails its item before its dispatch is
    journaled: surely not sent, never in doubt, and the other items run."""
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  each:
    server: s
    tool: echo
    for_each: ${{ ['1', '[1e400]', '2'] }}
    args: {v: "${{ from_json(item) }}"}
    continue_on_error: true
"""
    harness = Harness({"s": echo_tools})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(text), harness, events=events)
    assert len(harness.calls("s")) == 2
    failed = [e for e in events if e["type"] == "item_failed"]
    assert [(e["index"], e["kind"]) for e in failed] == [(1, "invalid-call")]
    assert "cannot be sent as JSON" in failed[0]["error"]
    assert not [e for e in events if e["type"] == "item_dispatched" and e["index"] == 1]
    assert outcome.in_doubt == []
