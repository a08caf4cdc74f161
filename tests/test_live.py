"""The live view drawn on a fixed-width console: what a terminal would show, as text."""

from __future__ import annotations

import io
from typing import Any

import trio
import trio.testing
from rich.console import Console

from runner.engine.core.events import Entry
from runner.engine.core.state import RunState
from runner.view.live import LiveView, render
from runner.view.text import ts_seconds
from tests.snapshots import check, entries
from tests.support import entry, folded

STEPS = ["list_files", "convert", "summary"]


def console() -> Console:
    return Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None)


def draw(
    state: RunState, now: float, frame: int = 0, *, planned: list[str] | None = None, started: float | None = None
) -> str:
    out = console()
    out.print(render(state, now, frame, planned=planned or [], started=started))
    text = out.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines())


def at(seconds: float) -> str:
    """A journal timestamp ``seconds`` after 2026-01-01T00:00:00Z."""
    whole, millis = divmod(round(seconds * 1000), 1000)
    return f"2026-01-01T00:{whole // 60:02d}:{whole % 60:02d}.{millis:03d}Z"


ZERO = ts_seconds(at(0)) or 0.0


def test_fan_out_line_has_bar_counts_rate_eta_and_latest_message() -> None:
    seen = entries("succeeded")
    first_done = next(
        i for i, e in enumerate(seen) if e.event.type == "item_succeeded" and getattr(e.event, "step", "") == "convert"
    )
    state = folded(seen[: first_done + 1])
    started = ts_seconds(state.steps["convert"].started_at)
    assert started is not None
    text = draw(state, now=started + 2.0, planned=STEPS, started=started)
    lines = text.splitlines()
    assert len(lines) == 2, text
    row, footer = lines
    assert row.startswith("⠋ convert ")
    assert "━━━━━━━━" + "─" * 16 in row  # 1/3 of a 24-cell bar
    assert " 1/3 " in row
    assert "0.5/s eta 4.0s" in row  # 1 item in 2 s; 2 to go
    latest = state.steps["convert"].latest_call()
    assert latest is not None and latest[1].message is not None
    assert latest[1].message in row
    assert footer == "steps: 1 done, 1 running, 1 pending · 2 calls in flight · 2.0s"
    check(text + "\n", "live_fanout.txt")


def test_single_call_shows_its_own_progress_or_a_spinner_and_count() -> None:
    state = folded(
        [
            {"type": "step_started", "step": "fetch", "ts": at(0)},
            {"type": "step_started", "step": "index", "ts": at(0)},
            {"type": "item_dispatched", "step": "fetch", "item": ""},
            {"type": "item_dispatched", "step": "index", "item": ""},
            {"type": "progress", "step": "fetch", "item": "", "progress": 30, "total": 40, "message": "page 3"},
            {"type": "progress", "step": "index", "item": "", "progress": 17, "message": "rows"},
        ]
    )
    lines = draw(state, now=ZERO + 3.5, frame=2, planned=["fetch", "index"], started=ZERO).splitlines()
    fetch, index, footer = lines
    assert fetch.startswith("⠹ fetch ")
    assert "━" * 18 + "─" * 6 in fetch and "30/40" in fetch and "3.5s" in fetch and fetch.endswith("page 3")
    assert index.startswith("⠹ index ")
    assert "⠹ 17" in index and index.endswith("rows") and "━" not in index
    assert footer == "steps: 0 done, 2 running, 0 pending · 2 calls in flight · 3.5s"


def test_many_running_steps_are_summarized() -> None:
    state = folded([{"type": "step_started", "step": f"s{n:02d}"} for n in range(20)])
    lines = draw(state, now=ZERO + 1.0).splitlines()
    assert len(lines) == 13
    assert lines[-1].startswith("steps: 0 done, 20 running, 0 pending (8 running not shown)")


def test_long_messages_are_cut_to_the_line() -> None:
    state = folded(
        [
            {"type": "step_started", "step": "s", "items": 2},
            {"type": "item_dispatched", "step": "s", "item": "k"},
            {"type": "progress", "step": "s", "item": "k", "progress": 1, "total": 2, "message": "x" * 300},
        ]
    )
    row = draw(state, now=ZERO + 1.0).splitlines()[0]
    assert len(row) <= 100 and row.endswith("…")


def feed(view: LiveView, items: list[Entry]) -> None:
    """What a run does: the state applies each entry, then the view observes it."""
    for item in items:
        view.state.apply(item)
        view.observe(item)


async def test_live_view_prints_lines_above_and_redraws_at_a_bounded_rate(
    autojump_clock: trio.testing.MockClock,
) -> None:
    out = console()
    view = LiveView(io.StringIO(), RunState(), steps=STEPS, log_level="info", console=out, clock=trio.current_time)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.run)
        feed(view, entries("succeeded"))
        burst = entry({"type": "progress", "step": "convert", "item": "x", "progress": 1})
        for _ in range(10_000):  # a burst of events draws nothing by itself
            feed(view, [burst])
        assert view.redraws <= 1
        await trio.sleep(2.0)
        view.close()
    assert 15 <= view.redraws <= 19  # 8 Hz over 2 s, plus the first and the last
    text = out.file.getvalue()  # type: ignore[attr-defined]
    for expected in (
        "server docs connected (mcp-run-demo 0.1.0, protocol 2025-11-25)",
        "✓ step list_files succeeded",
        "log warning docs: notes.md has no heading; titled it 'notes'",
        "log info docs: converted install.md -> install.html (302 bytes)",
        "✓ step convert succeeded: 3/3 succeeded",
        "✓ step summary succeeded",
    ):
        assert expected in text


async def test_live_view_failures_and_skips_print_above(autojump_clock: trio.testing.MockClock) -> None:
    out = console()
    view = LiveView(io.StringIO(), RunState(), steps=["convert", "summary"], console=out, clock=trio.current_time)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.run)
        feed(view, entries("failed"))
        view.close()
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "error convert[docs/missing.md]: tool error: Error executing tool convert_markdown" in text
    assert "✗ step convert failed: 2/3 succeeded, 1 failed" in text
    assert "- step summary skipped: dependency 'convert' failed" in text
    assert "converted install.md" not in text  # info is below the default level


def test_observe_never_draws() -> None:
    """observe() only queues lines: a whole 10,000-item fan-out observed without one redraw or one byte
    written, and the state the view draws from counts every item."""
    view = LiveView(io.StringIO(), RunState(), console=console())
    batch: list[dict[str, Any]] = [{"type": "step_started", "step": "s", "items": 10_000}]
    for n in range(10_000):
        key = f"i{n}"
        batch += [
            {"type": "item_dispatched", "step": "s", "item": key},
            {"type": "progress", "step": "s", "item": key, "progress": 1, "total": 2},
            {"type": "item_succeeded", "step": "s", "item": key},
        ]
    feed(view, [entry(fields, seq=n) for n, fields in enumerate(batch, start=1)])
    assert view.state.steps["s"].counts().succeeded == 10_000
    assert view.redraws == 0
    assert view.console.file.getvalue() == ""  # type: ignore[attr-defined]


def test_a_narrow_terminal_gets_a_shorter_bar_and_keeps_the_counts() -> None:
    state = folded(
        [{"type": "step_started", "step": "convert_documents", "items": 600}]
        + [{"type": "item_succeeded", "step": "convert_documents", "item": str(n)} for n in range(193)]
    )
    out = Console(file=io.StringIO(), width=60, force_terminal=True, color_system=None)
    out.print(render(state, ZERO + 1.4, 0, width=60))
    row = out.file.getvalue().splitlines()[0]  # type: ignore[attr-defined]
    assert "━━━─────────" in row and "193/600" in row and len(row.rstrip()) <= 60


def test_a_fan_out_counts_its_reused_and_reconciled_items() -> None:
    from tests.report_run import SETTLED

    state = folded(SETTLED[:-2])  # the step still running: the live view draws it
    assert "4/4 1 reused 1 reconciled" in draw(state, 1.0, planned=["convert"])
