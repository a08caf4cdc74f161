"""The live terminal view, drawn with ``rich``; imported only when a terminal is there to draw on.

:class:`LiveView` draws from the run's :class:`~runner.engine.core.state.RunState`, which the run keeps up to date;
``observe`` only queues the lines that must stay (log messages at or above ``--log-level``, failures, steps
finished), printed above the live region at the next redraw, in one write. Text that came from a server
(errors, log messages, progress messages, item keys) is shown through :func:`runner.termsafe.terminal`: its
control characters are escaped, never sent to the terminal. Drawing is the job of
:meth:`LiveView.run`, a task that redraws at most ``hz`` times a second (8 by default) whatever the rate of
events, so a fast batch is not slowed by its own display.

:func:`render` is a pure function of the state and the time, so tests draw it on a fixed-width console.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import Final, TextIO

import trio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from runner.engine.core.events import Entry, ItemFailed, LogMessage, StepFinished, StepSkipped, StepStarted, encode
from runner.engine.core.state import CallProgress, RunState, StepState
from runner.engine.core.vocabulary import StepStatus
from runner.termsafe import terminal
from runner.view.plain import finished_detail, rate_and_eta
from runner.view.text import (
    FailureLines,
    dispatch,
    format_elapsed,
    format_log,
    format_session,
    level_index,
    one_line,
    short_key,
    ts_seconds,
)
from runner.words import plural

__all__ = ["LiveView", "StepTally", "render"]

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
_SESSION_STYLE: Final[dict[str, str]] = {
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


def _call_text(key: str, progress: CallProgress, frame: int) -> Text:
    """The latest progress of one call: ``d2.md 2/4 render d2.md``, or ``⠙ 17 rows`` without a total."""
    text = Text()
    if key:
        text.append(terminal(short_key(key)) + " ", style="cyan")
    if progress.progress is not None:
        if progress.total:
            text.append(f"{_number(progress.progress)}/{_number(progress.total)} ")
        else:
            text.append(f"{SPINNER[frame % len(SPINNER)]} {_number(progress.progress)} ")
    if progress.message:
        text.append(terminal(one_line(progress.message, 120)), style="dim")
    return text


def _step_row(step: StepState, now: float, frame: int, bar_width: int) -> list[RenderableType]:
    spinner = Text(SPINNER[frame % len(SPINNER)], style="cyan")
    name = Text(step.id, style="bold", overflow="ellipsis", no_wrap=True)
    cells = _fan_out_cells if step.fan_out else _call_cells
    bar, count, speed, message = cells(step, now, frame, bar_width)
    message.no_wrap = True
    message.overflow = "ellipsis"
    return [spinner, name, bar, count, speed, message]


def _fan_out_cells(step: StepState, now: float, frame: int, bar_width: int) -> tuple[Text, Text, Text, Text]:
    """A fan-out's bar is its items done; its message, the call in flight that reported last."""
    counts = step.counts()
    bar = _bar(counts.done, counts.total, bar_width)
    count = Text(f"{counts.done}/{counts.total}")
    if counts.failed:
        count.append(f" {counts.failed}✗", style="red")
    if counts.in_doubt:
        count.append(f" {counts.in_doubt}?", style="yellow")
    for kept, word in ((step.reused, "reused"), (step.reconciled, "reconciled")):
        if kept:
            count.append(f" {kept} {word}", style="dim")
    rate, eta = rate_and_eta(step, now)
    speed = Text(f"{rate:.1f}/s" if rate is not None else "", style="dim")
    if eta is not None:
        speed.append(f" eta {format_elapsed(eta)}", style="dim")
    latest = step.latest_call()
    message = _call_text(latest[0], latest[1], frame) if latest is not None else Text()
    return bar, count, speed, message


def _call_cells(step: StepState, now: float, frame: int, bar_width: int) -> tuple[Text, Text, Text, Text]:
    """One call: its own progress is the bar (a spinner and a count when the server sends no total)."""
    latest = step.latest_call()
    call = latest[1] if latest is not None else None
    progress = call.progress if call is not None else None
    total = call.total if call is not None else None
    if progress is not None and total:
        bar, count = _bar(progress, total, bar_width), Text(f"{_number(progress)}/{_number(total)}")
    elif progress is not None:
        bar, count = Text(" " * bar_width), Text(f"{SPINNER[frame % len(SPINNER)]} {_number(progress)}")
    else:
        bar, count = Text(" " * bar_width), Text("")
    started = ts_seconds(step.started_at)
    speed = Text(format_elapsed(now - started) if started is not None else "", style="dim")
    message = Text()
    if call is not None and call.message:
        message = Text(terminal(one_line(call.message, 120)), style="dim")
    return bar, count, speed, message


class StepTally:
    """The steps by where they stand (pending, running, done), kept up to date from the events as they come, so
    a redraw reads a few counters and the running steps instead of walking every step: with 20,000 steps, 8
    redraws a second over all of them would cost more than the run. Starts from ``state`` (a resumed run's steps
    already ended count as done); ``planned``: the plan's steps (none: the state's)."""

    def __init__(self, state: RunState, planned: Iterable[str] = ()) -> None:
        ids = list(planned) or list(state.steps)
        self._order = {sid: n for n, sid in enumerate(ids)}
        self._where: dict[str, str] = {}
        self.running: dict[str, None] = {}
        self.pending = 0
        self.done = 0
        for sid in ids:
            step = state.steps.get(sid)
            self._move(sid, _where(step.status if step is not None else StepStatus.PENDING))

    def observe(self, event: object) -> None:
        if isinstance(event, StepStarted):
            self._move(event.step, "running")
        elif isinstance(event, StepFinished | StepSkipped):
            self._move(event.step, "done")

    def running_in_order(self) -> list[str]:
        """The running steps in plan order (steps the plan does not name last)."""
        last = len(self._order)
        return sorted(self.running, key=lambda sid: self._order.get(sid, last))

    def _move(self, sid: str, where: str) -> None:
        before = self._where.get(sid)
        if before == where:
            return
        if before == "running":
            del self.running[sid]
        elif before == "pending":
            self.pending -= 1
        elif before == "done":
            self.done -= 1
        self._where[sid] = where
        if where == "running":
            self.running[sid] = None
        elif where == "pending":
            self.pending += 1
        else:
            self.done += 1


def _where(status: StepStatus) -> str:
    if status is StepStatus.RUNNING:
        return "running"
    return "pending" if status is StepStatus.PENDING else "done"


def render(
    state: RunState,
    now: float,
    frame: int = 0,
    width: int = 100,
    *,
    planned: Iterable[str] = (),
    started: float | None = None,
    tally: StepTally | None = None,
) -> RenderableType:
    """The live region: one line per running step, then a footer with the step counts and calls in flight.
    ``now`` and ``started`` are POSIX times (the state's are UTC timestamps); ``planned`` the plan's steps;
    ``width`` the terminal's: a narrow one gets a shorter bar. ``tally``: the steps by where they stand, kept
    by the caller as events come (without one, it is counted from ``state`` now)."""
    if tally is None:
        tally = StepTally(state, planned)
    bar_width = BAR_WIDTH if width >= 90 else BAR_WIDTH // 2 if width >= 60 else 6
    table = Table.grid(padding=(0, 1), expand=True)  # expand: the message column (ratio 1) takes what is left
    table.add_column(width=1, no_wrap=True)
    table.add_column(max_width=28, no_wrap=True)
    table.add_column(width=bar_width, no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    running = [state.step(sid) for sid in tally.running_in_order()]
    for step in running[:MAX_STEPS]:
        table.add_row(*_step_row(step, now, frame, bar_width))
    footer = Text(f"steps: {tally.done} done, {len(running)} running, {tally.pending} pending", style="dim")
    if len(running) > MAX_STEPS:
        footer.append(f" ({len(running) - MAX_STEPS} running not shown)", style="dim")
    in_flight = sum(len(step.calls) for step in running)  # only a running step has calls in flight
    footer.append(f" · {plural(in_flight, 'call')} in flight", style="dim")
    if started is not None:
        footer.append(f" · {format_elapsed(now - started)}", style="dim")
    return Group(table, footer)


class LiveView:
    """A ``rich`` live region on ``stream`` (a terminal), redrawn by :meth:`run` at most ``hz`` times a second.

    ``console`` and ``clock`` are injectable for tests: a fixed-width ``Console`` over a ``StringIO`` and a
    fake clock give a deterministic drawing.
    """

    def __init__(
        self,
        stream: TextIO,
        state: RunState,
        *,
        steps: Iterable[str] = (),
        log_level: str = "warning",
        no_color: bool = False,
        hz: float = 8.0,
        console: Console | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.console = console or Console(file=stream, no_color=no_color, highlight=False, soft_wrap=False)
        self.state = state
        self._planned = list(steps)
        self._tally = StepTally(state, self._planned)
        self._threshold = level_index(log_level)
        self._interval = 1.0 / hz
        self._clock = clock
        self._started: float | None = None
        self._lines: list[Text] = []
        self._failures = FailureLines()
        self._frame = 0
        self._closed = trio.Event()
        # Writes to sys.stderr while the region is up (warnings of the run) are routed above it by rich.
        self._redirect = stream is sys.stderr
        self.redraws = 0

    # -- called for every entry: lines to print, never a drawing -----------------------------------------

    def _add(self, line: Text) -> None:
        repeats = self._failures.repeats.take()
        if repeats is not None:
            self._lines.append(Text(terminal(repeats), style="dim"))
        self._lines.append(line)

    def observe(self, entry: Entry) -> None:
        """Count the steps, and queue the line ``entry`` prints (:func:`~runner.view.text.dispatch`); the
        region is drawn from the state, not from here."""
        self._tally.observe(entry.event)
        if self._started is None:
            self._started = self._clock()
        dispatch(self, entry)

    def _on_item_failed(self, entry: Entry) -> None:
        event = entry.event
        assert isinstance(event, ItemFailed)
        style = "yellow" if event.retrying or (event.kind is not None and event.kind.in_doubt) else "red"
        self._failures.show(
            encode(entry),
            lambda text: self._add(Text(terminal(text), style=style)),
            lambda text: self._lines.append(Text(terminal(text), style="dim")),  # a crash's stderr
        )

    def _on_log(self, entry: Entry) -> None:
        event = entry.event
        assert isinstance(event, LogMessage)
        if level_index(event.level) >= self._threshold:
            self._add(Text(terminal(format_log(encode(entry))), style=_LEVEL_STYLE.get(event.level, "")))

    def _on_step_finished(self, entry: Entry) -> None:
        event = entry.event
        assert isinstance(event, StepFinished)
        step = self.state.step(event.step)
        status = event.status
        line = Text(f"{_STATUS_MARK.get(status, '·')} ", style=_STATUS_STYLE.get(status, ""))
        line.append(terminal(f"step {event.step} {status}{finished_detail(step, event.error)}"))
        begun, ended = ts_seconds(step.started_at), ts_seconds(entry.ts)
        if begun is not None and ended is not None:
            line.append(f" in {format_elapsed(ended - begun)}", style="dim")
        self._add(line)

    def _on_step_skipped(self, entry: Entry) -> None:
        assert isinstance(entry.event, StepSkipped)
        self._add(Text(terminal(f"- step {entry.event.step} skipped: {entry.event.reason}"), style="dim"))

    def _on_session_opened(self, entry: Entry) -> None:
        first, _, detail = (format_session(encode(entry)) or "").partition("\n")
        self._add(Text(terminal(first), style=_SESSION_STYLE[entry.event.type]))
        if detail:
            self._lines.append(Text(terminal(detail), style="dim"))

    _on_session_lost = _on_session_retrying = _on_session_failed = _on_session_opened

    # -- drawing -----------------------------------------------------------------------------------------

    def draw(self, live: Live) -> None:
        """Print the queued lines above the region (one write), then redraw the region."""
        if self._lines:
            lines, self._lines = self._lines, []
            live.console.print(Group(*lines), soft_wrap=True)
        self._frame += 1
        region = render(
            self.state,
            self._clock(),
            self._frame,
            live.console.width,
            planned=self._planned,
            started=self._started,
            tally=self._tally,
        )
        live.update(region, refresh=True)
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
            repeats = self._failures.repeats.take()
            if repeats is not None:
                self._lines.append(Text(terminal(repeats), style="dim"))
            self.draw(live)
            live.update(Text(""), refresh=True)

    def close(self) -> None:
        self._closed.set()
