"""Many steps, not only many items: what a run, a plan and the live view hold and walk must grow with the work
in flight, not with the number of steps. Structural checks (tasks alive, memory per step at two sizes, garbage
collections, steps read per redraw), never timings."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any, ClassVar

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.engine.core.events import decode
from runner.engine.core.readiness import Readiness, reads_of
from runner.engine.core.state import RunState, StepState
from runner.engine.journal.writer import EventLog
from runner.engine.scheduler import Scheduler, SchedulerOptions
from runner.view.live import StepTally, render
from runner.workflow.loader import parse_workflow, validate
from runner.workflow.plan import Plan
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, plan_of
from tests.snapshots import entries
from tests.support import folded

BIG = 20_000  # characters in each result of the memory test


def chain(n: int, tool: str = "echo", extra: str = "") -> str:
    """Step i reads step i-1's text."""
    lines = ["version: 1", "servers:", "  s: {command: [fake]}", "steps:"]
    for i in range(n):
        lines += [f"  s{i}:", "    server: s", f"    tool: {tool}"]
        lines.append(f'    args: {{text: "${{{{ length(steps.s{i - 1}.text) }}}}"}}' if i else "    args: {text: a}")
    return "\n".join(lines) + "\n" + extra


def tools(server: FakeServer) -> None:
    async def echo(call: FakeCall) -> dict[str, Any]:
        return text_result(str(call.arguments.get("text")))

    async def slow(call: FakeCall) -> dict[str, Any]:
        await trio.sleep(1)
        return text_result("done")

    async def big(call: FakeCall) -> dict[str, Any]:
        return text_result("x" * BIG + str(call.arguments.get("text")))

    server.tools.update(echo=echo, slow=slow, big=big)


async def run(plan: Plan, *, control: Any = None) -> tuple[Scheduler, Any]:
    """Run ``plan`` as the run lifecycle does it (a live state that keeps no results of the attempt), without a
    journal file."""
    state = RunState(keep_results=set())
    log = EventLog(None)
    log.subscribe(state.apply)
    scheduler = Scheduler(
        plan,
        inputs={},
        env={},
        opener=Harness({"s": tools}).opener,
        log=log,
        state=state,
        options=SchedulerOptions(concurrency=16),
    )
    async with trio.open_nursery() as nursery:
        if control is not None:
            nursery.start_soon(control, scheduler)
        outcome = await scheduler.run()
        nursery.cancel_scope.cancel()
    return scheduler, outcome


def count_tasks(task: trio.lowlevel.Task) -> int:
    return 1 + sum(count_tasks(child) for nursery in task.child_nurseries for child in nursery.child_tasks)


async def test_a_chain_holds_a_few_tasks_not_one_per_step(autojump_clock: trio.abc.Clock) -> None:
    seen: list[int] = []

    async def control(scheduler: Scheduler) -> None:
        for _ in range(5):
            await trio.sleep(50.5)  # one step every second
            seen.append(count_tasks(trio.lowlevel.current_root_task()))

    _, outcome = await run(plan_of(chain(300, tool="slow")), control=control)
    assert outcome.status == "succeeded"
    assert len(seen) == 5 and max(seen) < 20, seen  # a step waiting for another has no task


async def test_a_chain_keeps_the_results_only_while_some_step_will_read_them(autojump_clock: trio.abc.Clock) -> None:
    """Peak memory during the run, per step, at two sizes: a chain whose steps each return 20 KB, each read by
    the next step, holds one or two of them, not all of them."""

    async def peak_during(n: int) -> int:
        plan = plan_of(chain(n, tool="big"))
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            _, outcome = await run(plan)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert outcome.status == "succeeded"
        return peak

    small, large = await peak_during(40), await peak_during(160)
    per_step = (large - small) / 120
    assert per_step < BIG / 2, f"{per_step:.0f} bytes more per step ({small} -> {large})"


async def test_outputs_keep_the_results_they_read(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(chain(5, extra="outputs:\n  first: ${{ steps.s0.text }}\n  last: ${{ steps.s4.text }}\n"))
    _, outcome = await run(plan)
    assert outcome.outputs == {"first": "a", "last": "1"}


def test_validate_collects_no_garbage_while_it_loads_and_plans() -> None:
    lines = ["version: 1", "servers:", "  s: {command: [x]}", "steps:"]
    for i in range(2000):
        lines.append(
            f'  s{i}: {{server: s, tool: t, args: {{a: "${{{{ steps.s{i - 1}.text }}}}"}}}}'
            if i
            else "  s0: {server: s, tool: t}"
        )
    text = "\n".join(lines) + "\n"
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    assert gc.isenabled()
    gc.callbacks.append(count)
    try:
        plan = validate(parse_workflow(text))
    finally:
        gc.callbacks.remove(count)
    assert len(plan.steps) == 2000
    assert len(collections) < 5, collections  # 249 with collection on, 2 of them full ones
    assert gc.isenabled()  # turned back on
    gc.disable()
    try:
        validate(parse_workflow(text.replace("s1999", "s1999:")))  # an error on the way out, GC off before
    except Exception:
        pass  # any refusal: what matters is the GC's state after it
    finally:
        still_off = not gc.isenabled()
        gc.enable()
    assert still_off  # left as the caller had it


def test_the_live_region_reads_only_the_running_steps() -> None:
    state = RunState()
    planned = [f"s{i}" for i in range(3000)]
    for sid in planned[:-2]:
        state.steps[sid] = StepState(sid)
        state.apply(decode({"seq": 1, "ts": "2026-01-01T00:00:00.000Z", "type": "step_started", "step": sid}))
        state.apply(
            decode(
                {
                    "seq": 2,
                    "ts": "2026-01-01T00:00:01.000Z",
                    "type": "step_finished",
                    "step": sid,
                    "status": "succeeded",
                    "counts": {},
                }
            )
        )
    state.apply(decode({"seq": 3, "ts": "2026-01-01T00:00:02.000Z", "type": "step_started", "step": "s2998"}))
    tally = StepTally(state, planned)

    class Counting(dict[str, StepState]):
        asked: ClassVar[list[str]] = []

        def get(self, key: str, default: Any = None) -> Any:
            self.asked.append(key)
            return super().get(key, default)

        def __iter__(self) -> Any:
            raise AssertionError("a redraw walked every step")

    counting = Counting(state.steps)
    state.steps = counting
    for _ in range(3):
        render(state, 3.0, tally=tally, planned=planned)
    assert counting.asked == ["s2998"] * 3
    assert (tally.done, len(tally.running), tally.pending) == (2998, 1, 1)


def test_the_tally_counts_as_a_walk_of_the_state_would() -> None:
    seen = entries("succeeded")
    planned = ["list_files", "convert", "summary"]
    tally = StepTally(RunState(), planned)
    for n, entry in enumerate(seen):
        tally.observe(entry.event)
        fresh = StepTally(folded(seen[: n + 1]), planned)
        assert (tally.done, tally.pending, tally.running_in_order()) == (
            fresh.done,
            fresh.pending,
            fresh.running_in_order(),
        )


@st.composite
def dags(draw: st.DrawFn) -> str:
    """A workflow of up to 12 steps, each reading (a template) or needing (``needs``) some earlier ones, and
    outputs reading some."""
    n = draw(st.integers(1, 12))
    lines = ["version: 1", "servers:", "  s: {command: [x]}", "steps:"]
    for i in range(n):
        earlier = [f"s{j}" for j in range(i)]
        reads = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=3)) if earlier else []
        needs = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2)) if earlier else []
        args = ", ".join(f'a{k}: "${{{{ steps.{r}.text }}}}"' for k, r in enumerate(reads))
        lines.append(f"  s{i}: {{server: s, tool: t, args: {{{args}}}, needs: [{', '.join(needs)}]}}")
    kept = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=2))
    if kept:
        lines.append("outputs:")
        lines += [f"  o{i}: ${{{{ steps.s{i}.text }}}}" for i in kept]
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(dags(), st.randoms(use_true_random=False))
def test_readiness_starts_each_step_once_after_its_dependencies_and_drops_views_after_their_readers(
    text: str, rnd: Any
) -> None:
    plan = plan_of(text)
    reads = reads_of(plan)
    readers = {sid: {r for r, names in reads.items() if sid in names} for sid in plan.order}
    kept = {ref.name for ref in plan.outputs.references if ref.root == "steps"}
    readiness = Readiness(plan)
    ready = readiness.first()
    started, ended, dropped = set(ready), set(), set()
    while ready:
        sid = ready.pop(rnd.randrange(len(ready)))
        assert set(plan.steps[sid].dependencies) <= ended  # started only once every dependency ended
        ended.add(sid)
        now_ready, unread = readiness.ended(sid)
        for step in now_ready:
            assert step not in started
            started.add(step)
        ready += now_ready
        for name in unread:
            assert name not in dropped and name not in kept
            assert readers[name] <= ended and name in ended  # nobody left to read it
            dropped.add(name)
    assert started == ended == set(plan.order)
    assert dropped == set(plan.order) - kept  # every view but those the outputs read is dropped in the end


def test_a_view_read_only_by_a_cache_key_or_a_reconcile_template_is_kept_for_it() -> None:
    plan = plan_of(
        """version: 1
servers:
  s: {command: [x]}
steps:
  version: {server: s, tool: t}
  asked: {server: s, tool: t}
  call:
    server: s
    tool: t
    needs: [version, asked]
    args: {}
    cache: 7d
    cache_key: ${{ steps.version.text }}
    reconcile: {tool: r, args: {v: "${{ steps.asked.text }}"}, done: "${{ result.json.found }}", idempotent: true}
"""
    )
    assert sorted(reads_of(plan)["call"]) == ["asked", "version"]
    readiness = Readiness(plan)
    assert readiness.ended("version") == ([], [])  # kept: `call` reads it and has not ended
    assert readiness.ended("asked") == (["call"], [])
    assert readiness.ended("call") == ([], ["version", "asked", "call"])
