"""Showing a run as it goes: its events as lines, its numbers from its state.

Three views, chosen by :func:`make_view`:

- the **live view** (:mod:`runner.view.live`, drawn with ``rich``) when stderr is a terminal: one line per
  running step, redrawn at a bounded rate by its own task; log messages, failures and finished steps print
  above it;
- :class:`PlainView` otherwise (CI logs, cron mail, pipes), or with ``--no-progress``: timestamped lines for
  step started and finished, a fan-out progress line at most every ``interval`` seconds (not with
  ``--no-progress``), failures, and server log messages at or above ``--log-level``. When
  ``GITHUB_ACTIONS=true``, failures are also written as ``::error`` workflow commands;
- with ``--quiet``, a :class:`PlainView` that prints failures and error-level log messages only.

A view is given the run's :class:`~runner.engine.core.state.RunState` and ``observe``\\ s every entry after the
state applied it: it writes the line an event calls for (:mod:`runner.view.text`), and reads every count,
rate and status from the state, never from its own tally. Entries reach a view already masked by the
:class:`~runner.engine.journal.writer.EventLog`; every line is written through :func:`runner.termsafe.terminal`
(a server's control characters shown as escapes, never sent to the terminal or the log).

This module imports no ``rich``: :mod:`runner.view.live` is imported only when a live view is drawn.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TextIO

import trio

from runner.engine.core.events import (
    Entry,
    ItemFailed,
    ItemSucceeded,
    LogMessage,
    StepFinished,
    StepSkipped,
    StepStarted,
    StreamResumed,
    TaskUpdated,
    encode,
    task_words,
)
from runner.engine.core.state import RunState, StepState
from runner.termsafe import terminal
from runner.view.text import (
    ERROR_LEVEL,
    FailureLines,
    clock_time,
    dispatch,
    format_elapsed,
    format_log,
    format_session,
    github_error,
    kept_words,
    level_index,
    one_line,
    ts_seconds,
    where,
)
from runner.words import plural

__all__ = ["NullView", "PlainView", "View", "ViewOptions", "finished_detail", "make_view", "rate_and_eta"]


class View(Protocol):
    def observe(self, entry: Entry) -> None: ...

    async def run(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ViewOptions:
    """What the command line says about showing a run."""

    quiet: bool = False
    progress: bool = True
    log_level: str = "warning"


class NullView:
    """Shows nothing."""

    def observe(self, entry: Entry) -> None:
        return None

    async def run(self) -> None:
        return None

    def close(self) -> None:
        return None


def rate_and_eta(step: StepState, now: float) -> tuple[float | None, float | None]:
    """Items finished per second since the step started, counting only this attempt's work (results reused
    from earlier attempts are done from the start); and the time the rest would take at that rate."""
    started = ts_seconds(step.started_at)
    counts = step.counts()
    if started is None:
        return None, None
    end = ts_seconds(step.finished_at) if step.finished_at is not None else now
    elapsed = (end if end is not None else now) - started
    worked = counts.done - step.reused
    if worked <= 0 or elapsed <= 0:
        return None, None
    rate = worked / elapsed
    return rate, (counts.total - counts.done) / rate


def finished_detail(step: StepState, error: str | None = None) -> str:
    """``: 12/13 succeeded, 1 failed`` for a fan-out (from the state's counts), and the step's error."""
    text = ""
    if step.fan_out:
        counts = step.counts(live=False)
        text = f": {counts.succeeded}/{counts.total} succeeded"
        if counts.failed:
            text += f", {counts.failed} failed"
        if counts.in_doubt:
            text += f", {counts.in_doubt} in doubt"
        text += kept_words(step.reused, step.reconciled)
    if error:
        text += f": {one_line(error)}"
    return text


class PlainView:
    """Timestamped lines for logs. Times come from the entries (``ts``), so the output is a function of the
    entries alone: the same journal gives the same lines.

    ``interval`` bounds how often a fan-out's progress line is written; ``progress=False`` (``--no-progress``)
    drops those lines, keeping starts, finishes, warnings and errors; ``quiet`` keeps only failures and
    log messages at ``error`` and above.
    """

    def __init__(
        self,
        stream: TextIO,
        state: RunState,
        *,
        log_level: str = "warning",
        interval: float = 5.0,
        quiet: bool = False,
        progress: bool = True,
        github: bool = False,
    ) -> None:
        self._stream = stream
        self._state = state
        self._threshold = level_index(log_level)
        if quiet:
            self._threshold = max(self._threshold, ERROR_LEVEL)
        self._interval = interval
        self._quiet = quiet
        self._progress = progress and not quiet
        self._github = github
        self._last_line: dict[str, float] = {}
        self._closed = trio.Event()
        self._failures = FailureLines()
        self._last_ts: Any = None
        self._task_status: dict[tuple[str, str], str] = {}  # a fan-out item's task's last status shown

    def _write(self, ts: str, text: str) -> None:
        when = clock_time(ts)
        self._last_ts = ts
        repeats = self._failures.repeats.take()
        if repeats is not None:
            self._stream.write(f"{when} {terminal(repeats)}\n")
        self._stream.write(f"{when} {terminal(text)}\n")
        self._stream.flush()

    def _raw(self, text: str) -> None:
        self._stream.write(terminal(text) + "\n")
        self._stream.flush()

    def observe(self, entry: Entry) -> None:
        """Write what ``entry`` shows (:func:`~runner.view.text.dispatch`: its ``_on_<type>`` method); when
        quiet, only for the events a quiet view shows."""
        if self._quiet and entry.event.type not in _SHOWN_QUIET:
            return
        dispatch(self, entry)

    def _on_item_failed(self, entry: Entry) -> None:
        event = entry.event
        assert isinstance(event, ItemFailed)
        fields = encode(entry)
        self._failures.show(fields, lambda text: self._write(entry.ts, text), self._raw)  # a crash's stderr as it was
        if not event.retrying and self._github:
            self._raw(github_error(fields))
        self._progress_line(entry.ts, event.step)

    def _on_item_succeeded(self, entry: Entry) -> None:
        assert isinstance(entry.event, ItemSucceeded)
        self._progress_line(entry.ts, entry.event.step)

    def _on_log(self, entry: Entry) -> None:
        assert isinstance(entry.event, LogMessage)
        if level_index(entry.event.level) >= self._threshold:
            self._write(entry.ts, format_log(encode(entry)))

    def _on_session_failed(self, entry: Entry) -> None:
        fields = encode(entry)
        self._write(entry.ts, format_session(fields) or "")
        if self._github:
            self._raw(github_error(fields))

    def _on_session_opened(self, entry: Entry) -> None:
        self._write(entry.ts, format_session(encode(entry)) or "")

    _on_session_lost = _on_session_retrying = _on_session_opened

    def _on_step_started(self, entry: Entry) -> None:
        assert isinstance(entry.event, StepStarted)
        step = self._state.step(entry.event.step)
        self._last_line[step.id] = ts_seconds(entry.ts) or 0.0
        text = f"step {step.id} started" + (f": {plural(step.total, 'item')}" if step.fan_out else "")
        if step.reused:
            text += f" ({step.reused} done earlier)"
        self._write(entry.ts, text)

    def _on_step_finished(self, entry: Entry) -> None:
        event = entry.event
        assert isinstance(event, StepFinished)
        step = self._state.step(event.step)
        self._write(entry.ts, f"step {event.step} {event.status}{finished_detail(step, event.error)}")

    def _on_step_skipped(self, entry: Entry) -> None:
        assert isinstance(entry.event, StepSkipped)
        self._write(entry.ts, f"step {entry.event.step} skipped: {entry.event.reason}")

    def _on_stream_resumed(self, entry: Entry) -> None:
        assert isinstance(entry.event, StreamResumed)
        self._write(entry.ts, f"{where(entry.event.step, entry.event.item)}: stream resumed")

    def _on_task_status(self, entry: Entry) -> None:
        """A line per change of a plain step's task (status or message); for a fan-out's items, per change of
        status only: their messages (``40%``, ``41%``...) would be thousands of lines, and its progress line
        counts them."""
        event = entry.event
        assert isinstance(event, TaskUpdated)
        if self._state.step(event.step).fan_out:
            place = (event.step, event.item)
            if self._task_status.get(place) == event.status:
                return
            self._task_status[place] = event.status
            if event.status in _TASK_ENDS:
                del self._task_status[place]  # the item's result (or failure) follows: nothing more to compare
        text = task_words(event.status, event.message, event.task_id)
        self._write(entry.ts, f"{where(event.step, event.item)}: {text}")

    def _progress_line(self, ts: str, sid: str) -> None:
        if not self._progress:
            return
        step = self._state.steps.get(sid)
        if step is None or not step.fan_out:
            return
        now = ts_seconds(ts)
        if now is None or now - self._last_line.get(sid, now) < self._interval:
            # Not yet time for a line (every item but one in thousands): the step is counted only when one is due
            if sid not in self._last_line:
                counts = step.counts()
                if counts.done < counts.total:
                    self._last_line[sid] = now or 0.0
            return
        counts = step.counts()
        if counts.done >= counts.total:
            return
        self._last_line[sid] = now
        text = f"step {sid}: {counts.done}/{plural(counts.total, 'item')}"
        if counts.failed or counts.in_doubt:
            text += f" ({counts.failed} failed" + (f", {counts.in_doubt} in doubt" if counts.in_doubt else "") + ")"
        rate, eta = rate_and_eta(step, now)
        if rate is not None:
            text += f", {rate:.1f}/s"
            if eta is not None:
                text += f", eta {format_elapsed(eta)}"
        self._write(ts, text)

    async def run(self) -> None:
        await self._closed.wait()

    def close(self) -> None:
        repeats = self._failures.repeats.take()
        if repeats is not None:
            self._stream.write(f"{clock_time(self._last_ts)} {terminal(repeats)}\n")
            self._stream.flush()
        self._closed.set()


# The events a quiet plain view shows (by type): failures, finished calls (a fan-out's progress line), logs.
_TASK_ENDS: Final = frozenset({"completed", "failed", "cancelled"})  # a task's terminal statuses
_SHOWN_QUIET: Final = frozenset({"item_failed", "item_succeeded", "log", "session_failed"})


# -- choosing a view ----------------------------------------------------------------------------------------


def wants_live(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """A live view needs a terminal that can move its cursor."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and environ.get("TERM", "") != "dumb"


def make_view(
    options: ViewOptions,
    steps: Iterable[str],
    state: RunState,
    stream: TextIO,
    *,
    environ: Mapping[str, str] | None = None,
) -> View:
    """The view for these options and this terminal. ``steps`` are the plan's step ids, in order."""
    env = os.environ if environ is None else environ
    github = env.get("GITHUB_ACTIONS") == "true"
    if not options.quiet and options.progress and wants_live(stream, env):
        try:
            from runner.view.live import LiveView
        except ImportError:  # rich is missing from a partial install: plain lines still tell the story
            pass
        else:
            return LiveView(stream, state, steps=steps, log_level=options.log_level, no_color=bool(env.get("NO_COLOR")))
    return PlainView(
        stream, state, log_level=options.log_level, quiet=options.quiet, progress=options.progress, github=github
    )
