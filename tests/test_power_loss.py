"""Power loss, simulated: a run on scripted fakes whose journal is cut where a power loss could leave it, then
resumed; no call that is not safe to repeat is ever made twice, and nothing the journal held as succeeded is
lost or made again.

The journal's "disk" is the event log's ``offload``: it writes to a real file and lets each fsync take a
while on the virtual clock (the run goes on meanwhile, as it does while the disk thread fsyncs). Before each
of its jobs, and at the end of each fsync just before it completes, it notes a moment a power could fail:
the bytes made durable so far, the bytes written, and the calls the server has executed by then. A power loss
at that moment leaves the journal cut anywhere between the two (everything after the last fsync may be gone,
or any prefix of it may have reached the disk, possibly ending in a torn line), and the server has done what
it did.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from runner.engine.core.events import encode
from runner.engine.core.outcome import Outcome
from runner.engine.core.state import fold
from runner.engine.core.vocabulary import ItemStatus, RunStatus
from runner.engine.journal.reader import parse_journal
from runner.workflow.plan import Plan
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, Resume, plan_of, run_plan

KEYS = ["a", "b", "c", "d"]
STEPS = ("unsafe", "safe", "lookup")  # not safe to repeat; idempotent: true; annotated read-only (trusted)
SAFE = {"safe", "lookup"}

WORKFLOW = f"""
version: 1
servers:
  s: {{command: [fake], trust_annotations: true}}
inputs:
  keys: {{type: array, default: {KEYS}}}
steps:
  unsafe:
    server: s
    tool: work
    for_each: ${{{{ inputs.keys }}}}
    key: ${{{{ item }}}}
    concurrency: 2
    args: {{key: "unsafe-${{{{ item }}}}"}}
  safe:
    server: s
    tool: work
    for_each: ${{{{ inputs.keys }}}}
    key: ${{{{ item }}}}
    idempotent: true
    args: {{key: "safe-${{{{ item }}}}"}}
  lookup:
    server: s
    tool: look
    for_each: ${{{{ inputs.keys }}}}
    key: ${{{{ item }}}}
    args: {{key: "lookup-${{{{ item }}}}"}}
  last:
    server: s
    tool: work
    needs: [unsafe, safe, lookup]
    args: {{key: last}}
"""


@dataclass
class World:
    """What the fake server executed (each call's ``key``, as it arrived) and how long each call takes."""

    delays: dict[str, float]
    executed: list[str] = field(default_factory=list)

    def setup(self, server: FakeServer) -> None:
        async def work(call: FakeCall) -> dict[str, Any]:
            key = str(call.arguments["key"])
            self.executed.append(key)
            await trio.sleep(self.delays.get(key, 0))
            return text_result(key)

        server.tools.update(work=work, look=work)
        server.annotations["look"] = {"readOnlyHint": True}


Moment = tuple[int, int, Counter[str]]  # durable bytes, written bytes, calls executed


class Disk:
    """The journal's disk (the event log's ``offload``): see the module docstring."""

    def __init__(self, world: World, fsync_s: float) -> None:
        self.world = world
        self.fsync_s = fsync_s
        self.synced = 0
        self.written = 0
        self.fsyncs = 0
        self.moments: list[Moment] = []

    def moment(self) -> None:
        self.moments.append((self.synced, self.written, Counter(self.world.executed)))

    async def offload(self, write: Callable[[bytes, bool], None], data: bytes, sync: bool) -> None:
        self.moment()
        write(data, False)
        self.written += len(data)
        if sync:
            await trio.sleep(self.fsync_s)
            self.moment()
            write(b"", True)
            self.synced = self.written
            self.fsyncs += 1


def run_on_clock(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    async def main() -> Any:
        return await fn(*args, **kwargs)

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def first_run(plan: Plan, delays: dict[str, float], fsync_s: float) -> tuple[bytes, list[Moment], int]:
    """The run, start to end: its journal, the moments a power loss could strike, and its fsyncs."""
    world = World(delays)
    disk = Disk(world, fsync_s)
    with tempfile.TemporaryFile() as file:
        outcome = run_on_clock(
            run_plan, plan, Harness({"s": world.setup}), journal_fd=file.fileno(), offload=disk.offload
        )
        file.seek(0)
        journal = file.read()
    assert outcome.status is RunStatus.SUCCEEDED
    assert all(n == 1 for n in Counter(world.executed).values())
    disk.moment()  # after the run: everything durable
    return journal, disk.moments, disk.fsyncs


def resume(plan: Plan, events: list[dict[str, Any]], in_doubt: str, world: World) -> tuple[Outcome, list[Any]]:
    new: list[dict[str, Any]] = []
    outcome = run_on_clock(
        run_plan, plan, Harness({"s": world.setup}), prior=Resume(events=events, in_doubt=in_doubt), events=new
    )
    return outcome, new


def step_of(call_key: str) -> tuple[str, str]:
    step, _, item = call_key.partition("-")
    return step, item


def check_cut(plan: Plan, journal: bytes, cut: int, before: Counter[str], delays: dict[str, float]) -> None:
    """Resume the journal cut at ``cut`` after a power loss once the server had executed ``before``."""
    entries, _ = parse_journal(journal[:cut])
    held = fold(entries)
    events = [encode(e) for e in entries]
    world = World(delays)
    outcome, new = resume(plan, events, "ask", world)
    blocked: set[tuple[str, str]] = set()
    if outcome.blocked:
        assert world.executed == [], "a resume that stops on items in doubt calls nothing"
        blocked = {(d["step"], d["item"]) for d in outcome.in_doubt}
        outcome, _ = resume(plan, events + new, "skip", world)
    again = Counter(world.executed)
    total = before + again

    # Never twice, unless safe to repeat.
    for key, n in total.items():
        step, _ = step_of(key)
        assert step in SAFE or n == 1, f"{key} ran {n} times (cut at {cut})"
    # What the journal held as succeeded stays succeeded and is not called again.
    for sid, step in held.steps.items():
        for item in step.items.values():
            if item.status is ItemStatus.SUCCEEDED:
                call_key = f"{sid}-{item.key}" if sid in STEPS else sid
                assert again[call_key] == 0, f"{call_key} succeeded, and was called again (cut at {cut})"
                assert outcome.state.steps[sid].items[item.key].status is ItemStatus.SUCCEEDED
    # An unsafe call made before the power went out is either succeeded in the journal or reported in doubt.
    for key in before:
        step, item = step_of(key)
        if step in ("unsafe", "last"):
            held_item = held.item(step, item)
            assert held_item is not None, f"{key} ran before its dispatch was durable (cut at {cut})"
            assert held_item.status is ItemStatus.SUCCEEDED or (step, item) in blocked, (key, held_item.status, cut)
    # And the run ends with a definite answer for everything: safe items all succeeded.
    assert not outcome.blocked and outcome.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)
    for sid in SAFE:
        assert outcome.steps[sid].succeeded == len(KEYS)
    if not blocked:
        assert outcome.status is RunStatus.SUCCEEDED


def cuts(journal: bytes, moments: list[Moment], pick: Callable[[list[int]], int]) -> list[tuple[int, Counter[str]]]:
    """For each moment: the journal cut at its last fsync, at all it had written, at a line boundary between
    them and in the middle of a line (a torn write)."""
    out: dict[tuple[int, tuple[tuple[str, int], ...]], Counter[str]] = {}
    for synced, written, executed in moments:
        boundaries = [i + 1 for i in range(synced, written) if journal[i] == 0x0A]
        choices = {synced, written}
        if boundaries:
            choices.add(pick(boundaries))
        if written > synced:
            choices.add(pick(list(range(synced, written))))  # anywhere: maybe a torn line
        for cut in choices:
            out[(cut, tuple(sorted(executed.items())))] = executed
    return [(cut, executed) for (cut, _), executed in out.items()]


DELAYS = st.sampled_from([0.0, 0.001, 0.01, 0.05])


@settings(max_examples=12, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    delays=st.fixed_dictionaries({f"{s}-{k}": DELAYS for s in STEPS for k in KEYS}),
    fsync_s=st.sampled_from([0.0, 0.002, 0.02]),
    data=st.data(),
)
def test_a_power_loss_at_any_fsync_boundary_never_repeats_an_unsafe_call(
    delays: dict[str, float], fsync_s: float, data: st.DataObject
) -> None:
    plan = plan_of(WORKFLOW)
    journal, moments, fsyncs = first_run(plan, delays, fsync_s)
    assert fsyncs >= 2
    for cut, before in cuts(journal, moments, lambda xs: data.draw(st.sampled_from(xs))):
        check_cut(plan, journal, cut, before, delays)


def test_every_unsafe_dispatch_is_durable_before_its_call_and_safe_ones_do_not_wait() -> None:
    """With a slow disk (each fsync 1 s), the first run's moments show it: every unsafe call the server has
    executed has its dispatch within the durable bytes, while safe calls went out with their records not yet
    durable."""
    plan = plan_of(WORKFLOW)
    journal, moments, _ = first_run(plan, {}, 1.0)
    offsets = {}
    for entry_end, line in _lines(journal):
        if b'"type":"item_dispatched"' in line:
            entries, _ = parse_journal(line)
            event = entries[0].event
            offsets[f"{event.step}-{event.item}" if event.step in STEPS else "last"] = entry_end  # type: ignore[attr-defined]
    safe_early = False
    for synced, _written, executed in moments:
        for key in executed:
            if step_of(key)[0] in SAFE:
                safe_early = safe_early or offsets[key] > synced
            else:
                assert offsets[key] <= synced, f"{key} ran before its dispatch was durable"
    assert safe_early, "safe calls waited for an fsync"


def _lines(journal: bytes) -> list[tuple[int, bytes]]:
    out, start = [], 0
    while (end := journal.find(b"\n", start)) >= 0:
        out.append((end + 1, journal[start : end + 1]))
        start = end + 1
    return out
