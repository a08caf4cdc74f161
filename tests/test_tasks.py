"""Tool calls taken as tasks (2025-11-25), through the scheduler, on scripted fake servers and the virtual
clock: when a task is asked for, the poll schedule, each status, cancellation, the journal, and a resume
that collects a journaled task instead of putting it in doubt."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio

from runner.engine.scheduler import Scheduler
from runner.exitcodes import ExitCode
from runner.protocol.tasks import DEFAULT_POLL_INTERVAL, MAX_POLL_INTERVAL, MIN_POLL_INTERVAL
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.fakes.tasks import FakeTasks
from tests.harness import Harness, Resume, echo_tools, plan_of, run_plan

ONE = """
version: 1
servers:
  s: {command: [fake]}
steps:
  research:
    server: s
    tool: TOOL
    args: {seconds: SECONDS}
"""


def one(tool: str = "slow", seconds: float = 3.2, extra: str = "") -> Any:
    return plan_of(ONE.replace("TOOL", tool).replace("SECONDS", str(seconds)) + extra)


def with_tasks(tasks: FakeTasks, *, capability: bool = True) -> Any:
    def setup(server: FakeServer) -> None:
        echo_tools(server)
        server.tasks = tasks
        if not capability:
            server.tasks = None
            server.capabilities = {"tools": {}}

    return setup


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def test_a_required_tool_is_called_as_a_task_and_its_result_collected(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "required"}, poll_interval=500)
    events: list[dict[str, Any]] = []
    start = trio.current_time()
    outcome = await run_plan(one(), Harness({"s": with_tasks(tasks)}), events=events)
    assert outcome.exit_code == ExitCode.OK
    assert outcome.steps["research"].counts()["succeeded"] == 1
    assert tasks.augmented == ["slow"] and tasks.executions["slow"] == 1
    (created,) = of_type(events, "task_created")
    assert created["task_id"] == "task-1" and created["ttl"] == 24 * 3600 * 1000 and created["poll_interval"] == 500
    (result,) = of_type(events, "item_succeeded")
    assert result["result"]["content"][0]["text"] == "slow done"
    # Write-ahead: dispatch, then the task id, then every poll, then the result.
    seqs = [e["seq"] for e in events]
    assert seqs.index(created["seq"]) > seqs.index(of_type(events, "item_dispatched")[0]["seq"])
    assert created["seq"] < result["seq"]
    # The poll schedule honours pollInterval (0.5 s) from the task's creation until it completes (3.2 s).
    times = [round(t - start, 3) for t, _ in tasks.gets]
    assert times == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    statuses = [e["status"] for e in of_type(events, "task_status")]
    assert statuses == ["working", "completed"]


@pytest.mark.parametrize(
    ("interval_ms", "expected"),
    [(None, DEFAULT_POLL_INTERVAL), (0, MIN_POLL_INTERVAL), (3_600_000, MAX_POLL_INTERVAL), (2_000, 2.0)],
)
async def test_the_poll_interval_is_the_servers_within_bounds(
    autojump_clock: trio.abc.Clock, interval_ms: int | None, expected: float
) -> None:
    tasks = FakeTasks(support={"slow": "required"}, poll_interval=interval_ms)
    start = trio.current_time()
    outcome = await run_plan(one(seconds=60), Harness({"s": with_tasks(tasks)}))
    assert outcome.exit_code == ExitCode.OK
    times = [t - start for t, _ in tasks.gets]
    assert times[0] == pytest.approx(expected)
    gaps = {round(b - a, 6) for a, b in itertools.pairwise(times)}
    assert gaps == {round(expected, 6)}
    assert times[-2] < 60 <= times[-1]  # polled until the task was seen completed, not longer


@pytest.mark.parametrize(
    ("support", "capability", "asked"),
    [
        ("optional", True, True),
        ("required", True, True),
        ("forbidden", True, False),
        ("required", False, False),  # never without the server's capability
    ],
)
async def test_when_a_task_is_asked_for(
    autojump_clock: trio.abc.Clock, support: str, capability: bool, asked: bool
) -> None:
    tasks = FakeTasks(support={"slow": support})
    harness = Harness({"s": with_tasks(tasks, capability=capability)})
    outcome = await run_plan(one(), harness)
    assert outcome.exit_code == ExitCode.OK
    assert bool(tasks.augmented) is asked
    (call,) = harness.calls("s") if not asked else [None]
    if call is not None:
        assert "task" not in call.params


async def test_a_failed_task_is_a_tool_error(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"fail": "required"})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(one("fail"), Harness({"s": with_tasks(tasks)}), events=events)
    assert outcome.exit_code == ExitCode.FAILED
    assert [f["kind"] for f in outcome.failures] == ["tool-error"]
    assert [e["status"] for e in of_type(events, "task_status")][-1] == "failed"


async def test_a_task_cancelled_by_the_server_is_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"halt": "required"})

    def setup(server: FakeServer) -> None:
        with_tasks(tasks)(server)

        async def halt(call: FakeCall) -> dict[str, Any]:
            assert call.task is not None
            await trio.sleep(1.2)
            call.task.set("cancelled", "operator stopped it")
            call.task.done.set()
            await trio.sleep_forever()

        server.tools["halt"] = halt

    outcome = await run_plan(one("halt"), Harness({"s": setup}))
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    (doubt,) = outcome.in_doubt
    assert "cancelled by the server: operator stopped it" in doubt["error"]


async def test_input_required_waits_with_a_clear_status(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"ask": "required"})

    def setup(server: FakeServer) -> None:
        with_tasks(tasks)(server)

        async def ask(call: FakeCall) -> dict[str, Any]:
            assert call.task is not None
            call.task.set("input_required", "which colour?")
            await trio.sleep(2)  # nobody answers; the server gives up asking
            call.task.set("working", "going on with the default")
            await trio.sleep(1)
            return text_result("blue")

        server.tools["ask"] = ask

    events: list[dict[str, Any]] = []
    outcome = await run_plan(one("ask"), Harness({"s": setup}), events=events)
    assert outcome.exit_code == ExitCode.OK
    updates = [(e["status"], e.get("message")) for e in of_type(events, "task_status")]
    assert updates[1][0] == "input_required"
    assert updates[1][1] is not None and "which colour?" in updates[1][1] and "waiting for input" in updates[1][1]
    assert updates[2:] == [("working", "going on with the default"), ("completed", "going on with the default")]


async def test_a_timeout_cancels_the_task(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "required"})
    start = trio.current_time()
    outcome = await run_plan(one(seconds=100, extra="    timeout: 5\n"), Harness({"s": with_tasks(tasks)}))
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    (doubt,) = outcome.in_doubt
    assert doubt["kind"] == "timeout" and "tasks/cancel sent" in doubt["error"]
    assert tasks.cancels == ["task-1"]
    assert trio.current_time() - start == pytest.approx(5, abs=0.01)
    assert tasks.tasks["task-1"].status == "cancelled"


async def test_cancelling_the_run_leaves_the_task_to_a_resume(autojump_clock: trio.abc.Clock) -> None:
    # A run that stops (a second interrupt, the grace period over) neither cancels the task on the server nor
    # ends the item: its task id is journaled, and a resume collects the result.
    tasks = FakeTasks(support={"slow": "required"})

    async def control(scheduler: Scheduler) -> None:
        await trio.sleep(2)
        scheduler.cancel()

    events: list[dict[str, Any]] = []
    await run_plan(one(seconds=100), Harness({"s": with_tasks(tasks)}), control=control, events=events)
    assert tasks.cancels == []
    assert of_type(events, "item_failed") == []
    (created,) = of_type(events, "task_created")
    assert created["task_id"] == "task-1"


async def test_a_ttl_that_runs_out_puts_the_item_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "required"}, ttl=4_000)
    outcome = await run_plan(one(seconds=100), Harness({"s": with_tasks(tasks)}))
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    (doubt,) = outcome.in_doubt
    assert "outlived its ttl of 4000 ms" in doubt["error"]
    assert max(t for t, _ in tasks.gets) <= 4.0 + 1e-9


async def test_progress_of_a_task_reaches_the_item(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"steps": "required"})

    def setup(server: FakeServer) -> None:
        with_tasks(tasks)(server)

        async def steps(call: FakeCall) -> dict[str, Any]:
            for n in range(3):
                await trio.sleep(1)
                await call.progress(n + 1, 3, f"step {n + 1}")
            return text_result("done")

        server.tools["steps"] = steps

    events: list[dict[str, Any]] = []
    outcome = await run_plan(one("steps"), Harness({"s": setup}), events=events)
    assert outcome.exit_code == ExitCode.OK
    assert [e["message"] for e in of_type(events, "progress")] == ["step 1", "step 2", "step 3"]


async def _started_then_crashed(tasks: FakeTasks) -> list[dict[str, Any]]:
    """A run whose journal ends right after its task was journaled (as a SIGKILL would leave it)."""
    events: list[dict[str, Any]] = []
    await run_plan(one(seconds=3), Harness({"s": with_tasks(tasks)}), events=events)
    created = of_type(events, "task_created")[0]
    return events[: events.index(created) + 1]


async def test_a_resume_collects_a_journaled_task_instead_of_calling_again(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "required"})
    cut = await _started_then_crashed(tasks)
    gets_before = len(tasks.gets)
    harness = Harness({"s": with_tasks(tasks)})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(one(seconds=3), harness, prior=Resume(events=cut), events=events)  # in_doubt "ask"
    assert outcome.exit_code == ExitCode.OK and not outcome.blocked
    assert harness.calls("s") == []  # no tools/call: the result was collected
    assert tasks.executions["slow"] == 1
    assert len(tasks.gets) == gets_before + 1  # polled once, at once: it had finished
    assert of_type(events, "item_succeeded")[0]["result"]["content"][0]["text"] == "slow done"


async def test_a_resume_puts_a_lost_task_in_doubt_saying_so(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "required"})
    cut = await _started_then_crashed(tasks)
    tasks.forget()
    harness = Harness({"s": with_tasks(tasks)})
    outcome = await run_plan(one(seconds=3), harness, prior=Resume(events=cut))
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    (doubt,) = outcome.in_doubt
    assert "no longer knows task task-1" in doubt["error"] and "lost" in doubt["error"]
    assert harness.calls("s") == [] and tasks.executions["slow"] == 1
    # That decision is journaled: the next resume asks about it as about any item in doubt.
    assert outcome.blocked is False


@pytest.mark.parametrize(("support", "asked"), [("optional", False), ("required", True)])
async def test_tasks_off_asks_for_a_task_only_when_the_tool_requires_one(
    autojump_clock: trio.abc.Clock, support: str, asked: bool
) -> None:
    tasks = FakeTasks(support={"slow": support})
    text = (
        ONE.replace("TOOL", "slow")
        .replace("SECONDS", "1")
        .replace("{command: [fake]}", "{command: [fake], tasks: off}")
    )
    outcome = await run_plan(plan_of(text), Harness({"s": with_tasks(tasks)}))
    assert outcome.exit_code == ExitCode.OK
    assert bool(tasks.augmented) is asked


async def test_a_connection_lost_while_polling_polls_on_the_next_session(autojump_clock: trio.abc.Clock) -> None:
    """The server's process dies while its task works; the task lives on (its store outlives the process), the
    link starts the server again, and polling goes on there: the result is collected, the tool ran once."""
    async with trio.open_nursery() as outside:
        tasks = FakeTasks(support={"slow": "required"}, runner=outside)
        harness = Harness({"s": with_tasks(tasks)})

        async def control(scheduler: Scheduler) -> None:
            await trio.sleep(2.2)
            harness.servers["s"][0].end.break_connection()

        events: list[dict[str, Any]] = []
        outcome = await run_plan(one(seconds=6), harness, control=control, events=events)
        outside.cancel_scope.cancel()
    assert outcome.exit_code == ExitCode.OK, outcome.failures
    assert harness.opened == ["s", "s"] and tasks.executions["slow"] == 1
    assert len(of_type(events, "item_dispatched")) == 1 and len(of_type(events, "task_created")) == 1
    lost = [e for e in of_type(events, "task_status") if "connection lost while polling" in (e.get("message") or "")]
    assert len(lost) == 1
    assert of_type(events, "item_succeeded")[0]["result"]["content"][0]["text"] == "slow done"


async def test_a_resume_leaves_a_tasks_ttl_to_the_server(autojump_clock: trio.abc.Clock) -> None:
    """The ttl counts from the task's creation, which only the server knows on resume: a resume polls until the
    task ends or the server says it is gone, whatever time the ttl would have left."""
    async with trio.open_nursery() as outside:
        tasks = FakeTasks(support={"slow": "required"}, ttl=4_000, runner=outside)
        events: list[dict[str, Any]] = []
        first = await run_plan(one(seconds=10), Harness({"s": with_tasks(tasks)}), events=events)
        assert "outlived its ttl" in first.in_doubt[0]["error"]  # this attempt knew when the task was created
        cut = events[: events.index(of_type(events, "task_created")[0]) + 1]
        resumed = await run_plan(one(seconds=10), Harness({"s": with_tasks(tasks)}), prior=Resume(events=cut))
        outside.cancel_scope.cancel()
    assert resumed.exit_code == ExitCode.OK and tasks.executions["slow"] == 1
    assert trio.current_time() >= 10
