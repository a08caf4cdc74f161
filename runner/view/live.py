"""The live terminal view, drawn with ``rich``; imported only when a terminal is there to draw on.

:class:`LiveView` keeps the run's counters in a :class:`~runner.view.plain.ProgressModel` that ``observe`` updates
and never draws from: drawing is the job of :meth:`LiveView.run`, a task that redraws at most ``hz`` times a
second (8 by default) whatever the rate of events, so a fast batch is not slowed by its own display. Lines
that must stay (log messages at or above ``--log-level``, failures, steps finished) are queued by
``observe`` and printed above the live region at the next redraw, in one write.

:func:`render` is a pure function of the model and the time, so tests draw it on a fixed-width console.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import trio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from runner.engine.journal import IN_DOUBT_KINDS
from runner.view.plain import (
    ProgressModel,
    RepeatedFailures,
    StepProgress,
    error_detail,
    finished_detail,
    format_duration,
    format_failure,
    format_log,
    format_session,
    level_index,
    one_line,
    short_key,
    shows_failure,
)

__all__ = ["LiveView", "render"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
BAR_WIDTH = 24
MAX_STEPS = 12  # rows beyond this are summarized in one line: the region must fit a terminal

_LEVEL_STYLE = {
    "debug": "dim",
    "info": "",
    "notice": "cyan",
    "warning": "yellow",
    "error": "red",
    "critical": "bold red",
    "alert": "bold red",
    "emergency": "bold red",
}
_SESSION_STYLE = {
    "session_failed": "red",
    "session_lost": "yellow",
    "session_retrying": "yellow",
    "session_opened": "dim",
}
_STATUS_STYLE = {"succeeded": "green", "failed": "red", "interrupted": "yellow", "skipped": "dim"}
_STATUS_MARK = {"succeeded": "✓", "failed": "✗", "interrupted": "!", "skipped": "-"}


def _bar(done: float, total: float, width: int) -> Text:
    """A bar that reads without colour too: ``━━━━━━━━──────``."""
    filled = 0 if total <= 0 else min(width, int(width * done / total))
    bar = Text("━" * filled, style="bar.complete")
    bar.append("─" * (width - filled), style="bar.back")
    return bar


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _call_text(key: str, progress: Any, frame: int) -> Text:
    """The latest progress of one call: ``d2.md 2/4 render d2.md``, or ``⠙ 17 rows`` without a total."""
    text = Text()
    if key:
        text.append(short_key(key, 20) + " ", style="cyan")
    if progress.progress is not None:
        if progress.total:
            text.append(f"{_number(progress.progress)}/{_number(progress.total)} ")
        else:
            text.append(f"{SPINNER[frame % len(SPINNER)]} {_number(progress.progress)} ")
    if progress.message:
        text.append(one_line(progress.message, 120), style="dim")
    return text


def _step_row(step: StepProgress, now: float, frame: int, bar_width: int) -> list[RenderableType]:
    spinner = Text(SPINNER[frame % len(SPINNER)], style="cyan")
    name = Text(step.id, style="bold", overflow="ellipsis", no_wrap=True)
    latest = step.latest_call()
    if step.fan_out:
        bar = _bar(step.done, step.total, bar_width)
        count = Text(f"{step.done}/{step.total}")
        if step.failed:
            count.append(f" {step.failed}✗", style="red")
        if step.in_doubt:
            count.append(f" {step.in_doubt}?", style="yellow")
        rate = step.rate(now)
        eta = step.eta(now)
        speed = Text(f"{rate:.1f}/s" if rate is not None else "", style="dim")
        if eta is not None:
            speed.append(f" eta {format_duration(eta)}", style="dim")
        message = _call_text(latest[0], latest[1], frame) if latest is not None else Text()
    else:
        # one call: its own progress is the bar (a spinner and a count when the server sends no total)
        call = latest[1] if latest is not None else None
        if call is not None and call.progress is not None and call.total:
            bar = _bar(call.progress, call.total, bar_width)
            count = Text(f"{_number(call.progress)}/{_number(call.total)}")
        elif call is not None and call.progress is not None:
            bar = Text(" " * bar_width)
            count = Text(f"{SPINNER[frame % len(SPINNER)]} {_number(call.progress)}")
        else:
            bar = Text(" " * bar_width)
            count = Text("")
        speed = Text(format_duration(now - step.started), style="dim")
        message = Text(one_line(call.message, 120), style="dim") if call is not None and call.message else Text()
    message.no_wrap = True
    message.overflow = "ellipsis"
    return [spinner, name, bar, count, speed, message]


def render(model: ProgressModel, now: float, frame: int = 0, width: int = 100) -> RenderableType:
    """The live region: one line per running step, then a footer with the step counts and calls in flight.
    ``width`` is the terminal's: a narrow one gets a shorter bar."""
    bar_width = BAR_WIDTH if width >= 90 else BAR_WIDTH // 2 if width >= 60 else 6
    table = Table.grid(padding=(0, 1), expand=True)  # expand: the message column (ratio 1) takes what is left
    table.add_column(width=1, no_wrap=True)
    table.add_column(max_width=28, no_wrap=True)
    table.add_column(width=bar_width, no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    running = model.running()
    for step in running[:MAX_STEPS]:
        table.add_row(*_step_row(step, now, frame, bar_width))
    done, n_running, pending = model.counts()
    footer = Text(f"steps: {done} done, {n_running} running, {pending} pending", style="dim")
    if len(running) > MAX_STEPS:
        footer.append(f" ({len(running) - MAX_STEPS} running not shown)", style="dim")
    footer.append(f" · {model.in_flight} call{'s' if model.in_flight != 1 else ''} in flight", style="dim")
    if model.started is not None:
        footer.append(f" · {format_duration(now - model.started)}", style="dim")
    return Group(table, footer)


class LiveView:
    """A ``rich`` live region on ``stream`` (a terminal), redrawn by :meth:`run` at most ``hz`` times a second.

    ``console`` and ``clock`` are injectable for tests: a fixed-width ``Console`` over a ``StringIO`` and a
    fake clock give a deterministic drawing.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        steps: Iterable[str] = (),
        log_level: str = "warning",
        no_color: bool = False,
        hz: float = 8.0,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console or Console(file=stream, no_color=no_color, highlight=False, soft_wrap=False)
        self.model = ProgressModel(steps, clock=clock)
        self._threshold = level_index(log_level)
        self._interval = 1.0 / hz
        self._clock = clock
        self._lines: list[Text] = []
        self._repeats = RepeatedFailures()
        self._details: set[str] = set()
        self._frame = 0
        self._closed = trio.Event()
        # Writes to sys.stderr while the region is up (warnings of the run) are routed above it by rich.
        self._redirect = stream is sys.stderr
        self.redraws = 0

    # -- called for every event: counters only ---------------------------------------------------------

    def _add(self, line: Text) -> None:
        repeats = self._repeats.take()
        if repeats is not None:
            self._lines.append(Text(repeats, style="dim"))
        self._lines.append(line)

    def observe(self, event: dict[str, Any]) -> None:
        step = self.model.observe(event)
        kind = event.get("type")
        if kind == "item_failed":
            if shows_failure(event) and not self._repeats.absorb(event):
                style = "yellow" if event.get("kind") in IN_DOUBT_KINDS or event.get("retrying") else "red"
                self._add(Text(format_failure(event), style=style))
                self._repeats.shown(event)
                detail = error_detail(event.get("error"))
                if detail is not None and detail not in self._details:  # a crash's stderr: once
                    self._details.add(detail)
                    self._lines.append(Text(detail, style="dim"))
        elif kind == "log":
            level = event.get("level")
            if level_index(level) >= self._threshold:
                self._add(Text(format_log(event), style=_LEVEL_STYLE.get(str(level), "")))
        elif kind == "step_finished":
            status = str(event.get("status"))
            line = Text(f"{_STATUS_MARK.get(status, '·')} ", style=_STATUS_STYLE.get(status, ""))
            line.append(f"step {event.get('step')} {status}{finished_detail(step, event)}")
            if step is not None and step.finished is not None:
                line.append(f" in {format_duration(step.finished - step.started)}", style="dim")
            self._add(line)
        elif kind == "step_skipped":
            self._add(Text(f"- step {event.get('step')} skipped: {event.get('reason')}", style="dim"))
        elif kind in _SESSION_STYLE:
            first, _, detail = (format_session(event) or "").partition("\n")
            self._add(Text(first, style=_SESSION_STYLE[str(kind)]))
            if detail:
                self._lines.append(Text(detail, style="dim"))

    # -- drawing -----------------------------------------------------------------------------------------

    def draw(self, live: Live) -> None:
        """Print the queued lines above the region (one write), then redraw the region."""
        if self._lines:
            lines, self._lines = self._lines, []
            live.console.print(Group(*lines), soft_wrap=True)
        self._frame += 1
        live.update(render(self.model, self._clock(), self._frame, live.console.width), refresh=True)
        self.redraws += 1

    async def run(self) -> None:
        live = Live(
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=self._redirect,
        )
        with live:
            while not self._closed.is_set():
                self.draw(live)
                with trio.move_on_after(self._interval):
                    await self._closed.wait()
            repeats = self._repeats.take()
            if repeats is not None:
                self._lines.append(Text(repeats, style="dim"))
            self.draw(live)
            live.update(Text(""), refresh=True)

    def close(self) -> None:
        self._closed.set()
