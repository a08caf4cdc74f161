"""Progress on Temporal: the latest progress per item rides in the batch activity's heartbeats beside the
dispatch markers, bounded, never delaying or overwriting a marker; the workflow journals what the activity
returns as ``progress`` events. Trio's virtual clock; no Temporal server."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from runner.protocol.mcp import Progress
from runner.temporal.markers import Markers
from runner.temporal.progress import MAX_ITEMS, MAX_MESSAGE, ProgressBoard
from tests.temporal.test_markers import Recorder


def test_the_board_keeps_the_latest_per_item_and_is_bounded() -> None:
    board = ProgressBoard()
    for i in range(MAX_ITEMS + 50):
        board.note(f"k{i}", Progress(progress=1, total=10))
    board.note("k0", Progress(progress=1))  # forgotten, then noted again: the most recent
    board.note("k149", Progress(progress=7, total=10, message="x" * 5000))
    details = board.details()
    assert len(details) == MAX_ITEMS
    assert "k0" in details and "k1" not in details and "k50" not in details
    assert details["k149"]["progress"] == 7 and details["k149"]["total"] == 10
    assert len(details["k149"]["message"]) == MAX_MESSAGE
    assert "total" not in details["k0"]
    board.done("k149")
    assert board.latest("k149") is None and "k149" not in board.details()


async def test_progress_rides_on_the_next_marker_heartbeat() -> None:
    sink = Recorder()
    sink.release.set()
    markers = Markers(sink)
    markers.progress.note("a", Progress(progress=3, total=4, message="almost"))
    assert sink.recorded == []  # progress alone does not ask for a heartbeat
    await markers.dispatched("b")
    [details] = sink.recorded
    assert details["dispatched"] == ["b"]
    assert details["progress"] == {"a": {"progress": 3, "total": 4, "message": "almost"}}


async def test_the_pump_sends_a_throttled_heartbeat_only_when_progress_changed(
    autojump_clock: trio.abc.Clock,
) -> None:
    sink = Recorder()
    sink.release.set()
    markers = Markers(sink)
    await markers.dispatched("a")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(markers.progress.pump, markers.nudge, 2.0)
        await trio.sleep(5)
        assert len(sink.recorded) == 1  # nothing changed: no heartbeat
        for n in range(10):  # ten notifications within one period: one heartbeat
            markers.progress.note("a", Progress(progress=n))
        await trio.sleep(2)
        assert len(sink.recorded) == 2
        assert sink.recorded[-1]["dispatched"] == ["a"]  # the markers go with it: never overwritten
        assert sink.recorded[-1]["progress"] == {"a": {"progress": 9}}
        await trio.sleep(10)
        assert len(sink.recorded) == 2
        nursery.cancel_scope.cancel()


async def test_a_progress_heartbeat_is_skipped_while_a_marker_heartbeat_is_in_flight() -> None:
    sink = Recorder()
    markers = Markers(sink)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(markers.dispatched, "a")
        await trio.testing.wait_all_tasks_blocked()
        assert sink.in_flight == 1
        markers.progress.note("a", Progress(progress=1))
        with trio.fail_after(1):
            await markers.nudge()  # returns at once: the heartbeat in flight or the next one carries it
        assert sink.in_flight == 1 and sink.recorded == []
        sink.release.set()
    [details] = sink.recorded
    assert details["dispatched"] == ["a"]


def test_the_workflow_journals_the_progress_an_activity_returned(monkeypatch: Any) -> None:
    import runner.temporal.dag as dag

    monkeypatch.setattr(dag.workflow, "now", lambda: __import__("datetime").datetime(2026, 1, 1))
    flow = dag.DagWorkflow()
    emitted: list[Any] = []
    monkeypatch.setattr(flow, "_emit", emitted.append)

    class Step:
        id = "call"

    flow._progress(Step(), "k1", {"progress": 5, "total": 10, "message": "half"})  # type: ignore[arg-type]
    flow._progress(Step(), "k2", None)  # type: ignore[arg-type]
    flow._progress(Step(), "k3", {"progress": "lots"})  # type: ignore[arg-type]
    [event] = emitted
    assert (event.type, event.step, event.item, event.progress, event.total, event.message) == (
        "progress", "call", "k1", 5.0, 10.0, "half"
    )  # fmt: skip


def test_the_board_reports_each_fresh_item_once() -> None:
    board = ProgressBoard()
    board.note("b", Progress(progress=1))
    board.note("a", Progress(progress=2))
    board.note("b", Progress(progress=3))
    assert board.fresh() == {"a": {"progress": 2}, "b": {"progress": 3}}
    assert board.fresh() == {}
    board.note("c", Progress(progress=1))
    board.done("c")
    assert board.fresh() == {}


def test_the_workflow_journals_signalled_progress_of_running_items_once(monkeypatch: Any) -> None:
    import runner.temporal.dag as dag

    flow = dag.DagWorkflow()
    emitted: list[Any] = []
    monkeypatch.setattr(flow, "_emit", emitted.append)

    class Step:
        id = "call"

    class Plan:
        def __init__(self) -> None:
            self.steps = {"call": Step()}

    flow._plan = Plan()  # type: ignore[assignment]
    flow._running[("call", "k1")] = None  # in a pending activity
    half = {"progress": 1, "total": 2}
    flow.progress({"step": "call", "items": {"k1": half, "k9": half}})  # k9 is not running: a late report
    flow.progress({"step": "call", "items": {"k1": half}})  # the same again: not journaled twice
    flow.progress({"step": "nope", "items": {"k1": {"progress": 2}}})
    flow.progress({"step": "call", "items": "garbage"})
    assert [(e.item, e.progress) for e in emitted] == [("k1", 1.0)]
    flow._progress(Step(), "k1", half)  # type: ignore[arg-type]  # the activity returns the same: already there
    assert len(emitted) == 1
    flow._progress(Step(), "k1", {"progress": 2, "total": 2})  # type: ignore[arg-type]
    assert [(e.item, e.progress) for e in emitted] == [("k1", 1.0), ("k1", 2.0)]
    flow.progress({"step": "call", "items": {"k1": {"progress": 3}}})  # ended: no longer running
    assert len(emitted) == 2


def test_the_runs_view_shows_the_latest_progress_at_most_every_two_seconds() -> None:
    from runner.cli.temporal import _Progress
    from runner.engine.core.events import Entry, ProgressNoted

    lines: list[str] = []

    class Console:
        def info(self, text: str) -> None:
            lines.append(text)

    now = [100.0]
    view = _Progress(Console(), quiet=False, clock=lambda: now[0])
    for seq, (at, progress) in enumerate([(100.0, 1), (101.0, 2), (102.5, 3)], start=1):
        now[0] = at
        view.entry(Entry(seq, "t", ProgressNoted(step="call", item="k1", progress=progress, total=4, message="hi")))
    assert lines == ["step call: item k1: 1/4 hi", "step call: item k1: 3/4 hi"]
    quiet = _Progress(Console(), quiet=True)
    quiet.entry(Entry(9, "t", ProgressNoted(step="call", item="k1", progress=1)))
    assert len(lines) == 2
