"""The live view drawn on a fixed-width console: what a terminal would show, as text."""

from __future__ import annotations

import io
from typing import Any

import trio
import trio.testing
from rich.console import Console

from runner.view.live import LiveView, render
from runner.view.plain import ProgressModel
from tests.snapshots import check, events

STEPS = ["list_files", "convert", "summary"]


def console() -> Console:
    return Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None)


def draw(model: ProgressModel, now: float, frame: int = 0) -> str:
    out = console()
    out.print(render(model, now, frame))
    text = out.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines())


def model_after(name: str, count: int, clock: list[float]) -> ProgressModel:
    model = ProgressModel(STEPS, clock=lambda: clock[0])
    for event in events(name)[:count]:
        model.observe(event)
    return model


def test_fan_out_line_has_bar_counts_rate_eta_and_latest_message() -> None:
    clock = [100.0]
    seen = events("succeeded")
    first_done = next(i for i, e in enumerate(seen) if e["type"] == "item_succeeded" and e["step"] == "convert")
    model = model_after("succeeded", first_done + 1, clock)
    text = draw(model, now=102.0)
    lines = text.splitlines()
    assert len(lines) == 2, text
    row, footer = lines
    assert row.startswith("⠋ convert ")
    assert "━━━━━━━━" + "─" * 16 in row  # 1/3 of a 24-cell bar
    assert " 1/3 " in row
    assert "0.5/s eta 4.0s" in row  # 1 item in 2 s; 2 to go
    latest = model.steps["convert"].latest_call()
    assert latest is not None and latest[1].message is not None
    assert latest[1].message in row
    assert footer == "steps: 1 done, 1 running, 1 pending · 2 calls in flight · 2.0s"
    check(text + "\n", "live_fanout.txt")


def test_single_call_shows_its_own_progress_or_a_spinner_and_count() -> None:
    model = ProgressModel(["fetch", "index"], clock=lambda: 0.0)
    model.observe({"type": "step_started", "step": "fetch"})
    model.observe({"type": "step_started", "step": "index"})
    model.observe({"type": "item_dispatched", "step": "fetch", "item": "", "seq": 1})
    model.observe({"type": "item_dispatched", "step": "index", "item": "", "seq": 2})
    model.observe({"type": "progress", "step": "fetch", "item": "", "progress": 30, "total": 40, "message": "page 3"})
    model.observe({"type": "progress", "step": "index", "item": "", "progress": 17, "message": "rows"})
    lines = draw(model, now=3.5, frame=2).splitlines()
    fetch, index, footer = lines
    assert fetch.startswith("⠹ fetch ")
    assert "━" * 18 + "─" * 6 in fetch and "30/40" in fetch and "3.5s" in fetch and fetch.endswith("page 3")
    assert index.startswith("⠹ index ")
    assert "⠹ 17" in index and index.endswith("rows") and "━" not in index
    assert footer == "steps: 0 done, 2 running, 0 pending · 2 calls in flight · 3.5s"


def test_many_running_steps_are_summarized() -> None:
    model = ProgressModel(clock=lambda: 0.0)
    for n in range(20):
        model.observe({"type": "step_started", "step": f"s{n:02d}"})
    lines = draw(model, now=1.0).splitlines()
    assert len(lines) == 13
    assert lines[-1].startswith("steps: 0 done, 20 running, 0 pending (8 running not shown)")


def test_long_messages_are_cut_to_the_line() -> None:
    model = ProgressModel(clock=lambda: 0.0)
    model.observe({"type": "step_started", "step": "s", "items": 2})
    model.observe({"type": "item_dispatched", "step": "s", "item": "k", "seq": 1})
    model.observe({"type": "progress", "step": "s", "item": "k", "progress": 1, "total": 2, "message": "x" * 300})
    row = draw(model, now=1.0).splitlines()[0]
    assert len(row) <= 100 and row.endswith("…")


async def test_live_view_prints_lines_above_and_redraws_at_a_bounded_rate(
    autojump_clock: trio.testing.MockClock,
) -> None:
    out = console()
    view = LiveView(io.StringIO(), steps=STEPS, log_level="info", console=out, clock=trio.current_time)
    recorded = events("succeeded")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.run)
        for event in recorded:
            view.observe(event)
        for n in range(10_000):  # a burst of events draws nothing by itself
            view.observe({"type": "progress", "step": "convert", "item": "x", "progress": n, "seq": n})
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
    view = LiveView(io.StringIO(), steps=["convert", "summary"], console=out, clock=trio.current_time)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.run)
        for event in events("failed"):
            view.observe(event)
        view.close()
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "error convert[docs/missing.md]: tool-error: Error executing tool convert_markdown" in text
    assert "✗ step convert failed: 2/3 succeeded, 1 failed" in text
    assert "- step summary skipped: dependency 'convert' failed" in text
    assert "converted install.md" not in text  # info is below the default level


def test_observe_never_draws() -> None:
    """observe() only counts: a whole 10,000-item fan-out observed without one redraw or one byte written."""
    view = LiveView(io.StringIO(), console=console())
    batch: list[dict[str, Any]] = [{"type": "step_started", "step": "s", "items": 10_000, "seq": 0}]
    for n in range(10_000):
        key = f"i{n}"
        batch += [
            {"type": "item_dispatched", "step": "s", "item": key, "seq": 4 * n + 1},
            {"type": "progress", "step": "s", "item": key, "progress": 1, "total": 2, "seq": 4 * n + 2},
            {"type": "item_succeeded", "step": "s", "item": key, "seq": 4 * n + 3},
        ]
    for event in batch:
        view.observe(event)
    assert view.model.steps["s"].succeeded == 10_000
    assert view.redraws == 0
    assert view.console.file.getvalue() == ""  # type: ignore[attr-defined]


def test_a_narrow_terminal_gets_a_shorter_bar_and_keeps_the_counts() -> None:
    model = ProgressModel(clock=lambda: 0.0)
    model.observe({"type": "step_started", "step": "convert_documents", "items": 600})
    for n in range(193):
        model.observe({"type": "item_succeeded", "step": "convert_documents", "item": str(n)})
    out = Console(file=io.StringIO(), width=60, force_terminal=True, color_system=None)
    out.print(render(model, 1.4, 0, width=60))
    row = out.file.getvalue().splitlines()[0]  # type: ignore[attr-defined]
    assert "━━━─────────" in row and "193/600" in row and len(row.rstrip()) <= 60
