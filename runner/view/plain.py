"""Showing a run as it goes, from the same events the journal gets.

Three views, chosen by :func:`make_view`:

- the **live view** (:mod:`runner.view.live`, drawn with ``rich``) when stderr is a terminal: one line per running
  step, redrawn at a bounded rate by its own task; log messages, failures and finished steps print above it;
- :class:`PlainView` otherwise (CI logs, cron mail, pipes), or with ``--no-progress``: timestamped lines for
  step started and finished, a fan-out progress line at most every ``interval`` seconds (not with
  ``--no-progress``), failures, and server log messages at or above ``--log-level``. When
  ``GITHUB_ACTIONS=true``, failures are also written as ``::error`` workflow commands;
- with ``--quiet``, a :class:`PlainView` that prints failures and error-level log messages only.

``observe(event)`` is called synchronously for every event the run emits, so it only updates counters
(:class:`ProgressModel`) and, for the plain view, writes the rare line; it never draws. Events reach a view
already masked by the :class:`~runner.engine.eventlog.EventLog`.

This module imports no ``rich``: ``runner.view.live`` is imported only when a live view is drawn.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TextIO

import trio

from runner.engine.journal import IN_DOUBT_KINDS
from runner.protocol.mcp import LOG_LEVELS

__all__ = [
    "CallProgress",
    "FailureGroup",
    "NullView",
    "PlainView",
    "ProgressModel",
    "RepeatedFailures",
    "StepProgress",
    "View",
    "error_detail",
    "failure_key",
    "format_duration",
    "format_failure",
    "format_group",
    "format_log",
    "format_session",
    "github_error",
    "group_failures",
    "make_view",
    "short_key",
    "shows_failure",
    "ts_seconds",
    "where",
]


class View(Protocol):
    def observe(self, event: dict[str, Any]) -> None: ...

    async def run(self) -> None: ...

    def close(self) -> None: ...


class NullView:
    """Shows nothing."""

    def observe(self, event: dict[str, Any]) -> None:
        return None

    async def run(self) -> None:
        return None

    def close(self) -> None:
        return None


# -- text shared by the views and by `mcp-run show`/`logs` ------------------------------------------------


def level_index(level: Any) -> int:
    """The RFC 5424 rank of a log level (``debug`` 0 ... ``emergency`` 7); unknown levels rank as ``info``."""
    try:
        return LOG_LEVELS.index(str(level))
    except ValueError:
        return 1


ERROR_LEVEL = LOG_LEVELS.index("error")


def one_line(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split("\n"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_key(key: Any, limit: int = 24) -> str:
    """An item key cut to ``limit`` characters, keeping its end (file names end paths; ids end URLs)."""
    text = str(key)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def where(step: Any, item: Any, limit: int = 24) -> str:
    """``step[item]``, or ``step`` for a step that does not fan out (its one item's key is empty)."""
    if step is None:
        return ""
    return f"{step}[{short_key(item, limit)}]" if item not in (None, "") else str(step)


def format_log(event: dict[str, Any], key_limit: int = 24) -> str:
    """``log warning docs (logger) convert[d1.md]: message``."""
    logger = f" ({event['logger']})" if event.get("logger") else ""
    place = where(event.get("step"), event.get("item"), key_limit)
    place = f" {place}" if place else ""
    return f"log {event.get('level')} {event.get('server')}{logger}{place}: {one_line(event.get('data'))}"


def error_detail(error: Any) -> str | None:
    """What an error says after its first line (a server's stderr tail, already indented and made printable
    by :mod:`runner.errors`), or None."""
    if not isinstance(error, str) or "\n" not in error:
        return None
    rest = error.split("\n", 1)[1].rstrip()
    return rest if rest.strip() else None


def shows_failure(event: Mapping[str, Any]) -> bool:
    """Whether a view prints this ``item_failed``: a final failure, or a call safe to repeat that is made
    again (``retry_in``); not an attempt that was surely not delivered (its server's link reports those)."""
    return not event.get("retrying") or event.get("retry_in") is not None


def format_failure(event: dict[str, Any]) -> str:
    """``error convert[d2.md]: tool-error: Markdown file not found: ...`` (``in doubt`` for unknown outcomes;
    ``calling again in 0.9s`` for a call safe to repeat)."""
    if event.get("retry_in") is not None:
        return (
            f"retrying {where(event.get('step'), event.get('item'))} in {float(event['retry_in']):.1f}s (safe to "
            f"repeat): {event.get('kind')}: {one_line(event.get('error'))}"
        )
    label = "in doubt" if event.get("kind") in IN_DOUBT_KINDS else "error"
    first = str(event.get("error")).split("\n", 1)[0]  # the rest (a stderr tail) is shown on lines of its own
    return f"{label} {where(event.get('step'), event.get('item'))}: {event.get('kind')}: {one_line(first)}"


# Numbers that differ from call to call without making the failure a different one: request ids.
_REQUEST_NUMBER = re.compile(r"\b(request|requests|id) \d+\b")


def failure_key(failure: Mapping[str, Any]) -> tuple[str, str, str]:
    """What makes two failures "the same": their step, kind, and the first line of their error with the
    item's key and request ids taken out (other numbers, exit codes among them, keep errors apart)."""
    text = str(failure.get("error") or "").split("\n", 1)[0]
    key = str(failure.get("item") or "")
    if len(key) > 1:  # as a whole word: a one-letter key would match inside every word
        text = re.sub(rf"(?<!\w){re.escape(key)}(?!\w)", "…", text)
    return str(failure.get("step")), str(failure.get("kind")), _REQUEST_NUMBER.sub(r"\1 #", text)


@dataclass(slots=True)
class FailureGroup:
    """Failures that read the same (see :func:`failure_key`): the first one, and the items of all."""

    first: Mapping[str, Any]
    items: list[str] = field(default_factory=list)


def group_failures(failures: Iterable[Mapping[str, Any]]) -> list[FailureGroup]:
    """Failures grouped by :func:`failure_key`, in the order each group first appears."""
    groups: dict[tuple[str, str, str], FailureGroup] = {}
    for failure in failures:
        group = groups.setdefault(failure_key(failure), FailureGroup(failure))
        group.items.append(str(failure.get("item") or ""))
    return list(groups.values())


def format_group(group: FailureGroup, *, label: str | None = None, limit: int = 3) -> str:
    """``failed convert[a.md]: kind: error`` for one, ``failed convert (16 items: a, b, c, ...): ...`` for more;
    ``not sent`` instead of ``failed`` when the server could not be reached (a resume runs them)."""
    first = group.first
    if label is None:
        label = "not sent" if first.get("kind") == "connection-before-send" else "failed"
    error = one_line(str(first.get("error") or "").split("\n", 1)[0], 200)
    if len(group.items) == 1:
        place = where(first.get("step"), first.get("item"))
    else:
        shown = ", ".join(short_key(i, 16) for i in group.items[:limit] if i)
        more = ", ..." if len(group.items) > limit else ""
        place = f"{first.get('step')} ({len(group.items)} items: {shown}{more})"
    return f"{label} {place}: {first.get('kind')}: {error}"


class RepeatedFailures:
    """Failures in a row that read the same are shown once, then counted: 16 items failing because their
    server went away make two lines, not sixteen. ``absorb`` a failure that repeats the last one shown;
    ``take`` the line that sums up what was absorbed before anything else is shown."""

    __slots__ = ("_items", "_key")

    def __init__(self) -> None:
        self._key: tuple[str, str, str] | None = None
        self._items: list[str] = []

    def absorb(self, event: Mapping[str, Any]) -> bool:
        if self._key is not None and self._key_of(event) == self._key:
            self._items.append(str(event.get("item") or ""))
            return True
        return False

    def shown(self, event: Mapping[str, Any]) -> None:
        self._key = self._key_of(event)
        self._items = []

    @staticmethod
    def _key_of(event: Mapping[str, Any]) -> tuple[str, str, str]:
        step, kind, error = failure_key(event)
        return step, kind + (" (retrying)" if event.get("retrying") else ""), error

    def take(self) -> str | None:
        text = None
        if self._items and self._key is not None:
            shown = ", ".join(short_key(i, 16) for i in self._items[:3] if i)
            more = ", ..." if len(self._items) > 3 else ""
            n = len(self._items)
            if self._key[1].endswith("(retrying)"):
                text = f"... and {n} more of {self._key[0]} called again for the same reason"
            else:
                text = f"... and {n} more item{'s' if n != 1 else ''} of {self._key[0]} with the same error"
            text += f" ({shown}{more})" if shown else ""
        self._key = None
        self._items = []
        return text


def format_session(event: dict[str, Any]) -> str | None:
    """The console line(s) for a ``session_*`` event; None for other events. A failure keeps the server's
    stderr tail on lines of its own."""
    kind = event.get("type")
    server = str(event.get("server"))
    error = _unprefixed(str(event.get("error") or ""), server)
    if kind == "session_opened":
        if event.get("reconnects"):
            return f"server {server} reconnected after {format_duration(float(event.get('down_s') or 0))}"
        info = event.get("server_info") or {}
        name = f"{info.get('name', '?')} {info.get('version', '')}".strip()
        return f"server {server} connected ({name}, protocol {event.get('protocol_version')})"
    if kind == "session_lost":
        return f"server {server}: connection lost: {one_line(error)}"
    if kind == "session_retrying":
        delay = float(event.get("delay_s") or 0)
        remaining = float(event.get("remaining_s") or 0)
        return (
            f"server {server}: unreachable ({one_line(error, 200)}); trying again in {delay:.1f}s "
            f"(gives up in {format_duration(remaining)})"
        )
    if kind == "session_failed":
        first, _, rest = error.partition("\n")
        return f"error server {server}: {one_line(first)}" + (f"\n{rest.rstrip()}" if rest.strip() else "")
    return None


def _unprefixed(error: str, server: str) -> str:
    """``docs: could not ...`` said about server ``docs``: the name once is enough."""
    prefix = f"{server}: "
    return error[len(prefix) :] if error.startswith(prefix) else error


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_error(event: dict[str, Any]) -> str:
    """A GitHub Actions ``::error`` workflow command for a failed item, step or server (values escaped)."""
    step = event.get("step")
    title = f"mcp-run step {step}" if step else f"mcp-run server {event.get('server')}"
    place = where(step, event.get("item"))
    message = f"{place}: " if place else ""
    message += f"{event.get('kind')}: {one_line(event.get('error'), 1000)}"
    return f"::error title={_escape_property(title)}::{_escape_data(message)}"


def format_duration(seconds: float) -> str:
    """``0.4s``, ``12s``, ``3m05s``, ``2h07m``."""
    if seconds < 10:
        return f"{max(seconds, 0):.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def ts_seconds(ts: Any) -> float | None:
    """An event's ``ts`` (ISO 8601, UTC) as POSIX seconds; None when it is not one."""
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _clock_time(ts: Any) -> str:
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).strftime("%H:%M:%S")
    except ValueError:
        return str(ts)


# -- the counters -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class CallProgress:
    """The last ``progress`` notification of one call in flight."""

    progress: float | None = None
    total: float | None = None
    message: str | None = None
    seq: int = 0


@dataclass(slots=True)
class StepProgress:
    id: str
    fan_out: bool
    total: int
    started: float
    status: str = "running"
    succeeded: int = 0
    failed: int = 0
    in_doubt: int = 0
    reused: int = 0  # succeeded in an earlier attempt of the run: done from the start, not part of the rate
    finished: float | None = None
    calls: dict[str, CallProgress] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.in_doubt

    def rate(self, now: float) -> float | None:
        """Items finished per second since the step started (results reused from the journal do not
        count); None before any finished."""
        elapsed = (self.finished if self.finished is not None else now) - self.started
        worked = self.done - self.reused
        if worked <= 0 or elapsed <= 0:
            return None
        return worked / elapsed

    def eta(self, now: float) -> float | None:
        rate = self.rate(now)
        return (self.total - self.done) / rate if rate else None

    def latest_call(self) -> tuple[str, CallProgress] | None:
        """The call in flight whose progress was reported last (the one worth showing)."""
        best: tuple[str, CallProgress] | None = None
        for key, call in self.calls.items():
            if best is None or call.seq > best[1].seq:
                best = (key, call)
        return best


class ProgressModel:
    """Counters per step, updated from events in O(1); what the views read when they draw.

    ``clock`` gives the time a step starts (the views pass ``time.monotonic``; the plain view passes the
    time of the event itself, so its output depends on the events only).
    """

    def __init__(self, steps: Iterable[str] = (), *, clock: Callable[[], float]) -> None:
        self.planned: list[str] = list(steps)
        self.steps: dict[str, StepProgress] = {}
        self.skipped: set[str] = set()
        self.in_flight = 0
        self.started: float | None = None
        self._clock = clock

    def observe(self, event: dict[str, Any]) -> StepProgress | None:
        """Update the counters; returns the step the event changed, if any."""
        kind = event.get("type")
        if kind == "progress":
            step = self.steps.get(str(event.get("step")))
            call = step.calls.get(str(event.get("item", ""))) if step is not None else None
            if call is None:
                return None  # a late notification for a call already finished
            call.progress = event.get("progress")
            call.total = event.get("total")
            if event.get("message"):
                call.message = str(event["message"])
            call.seq = int(event.get("seq") or 0)
            return step
        if kind == "item_dispatched":
            step = self.steps.get(str(event.get("step")))
            if step is not None:
                key = str(event.get("item", ""))
                if key not in step.calls:
                    self.in_flight += 1
                step.calls[key] = CallProgress()  # seq 0: shown only when no call has reported progress
            return step
        if kind in ("item_succeeded", "item_failed"):
            step = self.steps.get(str(event.get("step")))
            if step is None:
                return None
            if step.calls.pop(str(event.get("item", "")), None) is not None:
                self.in_flight -= 1
            if kind == "item_succeeded":
                step.succeeded += 1
            elif event.get("retrying"):
                pass  # the next attempt dispatches again
            elif event.get("kind") in IN_DOUBT_KINDS:
                step.in_doubt += 1
            else:
                step.failed += 1
            return step
        if kind == "step_started":
            now = self._clock()
            if self.started is None:
                self.started = now
            sid = str(event.get("step"))
            items = event.get("items")
            fan_out = isinstance(items, int)
            step = StepProgress(sid, fan_out, items if isinstance(items, int) else 1, now)
            reused = event.get("reused")
            if isinstance(reused, int):
                step.succeeded = step.reused = reused
            self.steps[sid] = step
            if sid not in self.planned:
                self.planned.append(sid)
            return step
        if kind == "step_finished":
            sid = str(event.get("step"))
            step = self.steps.get(sid)
            if step is None:  # failed before it started (a for_each that did not render)
                step = self.steps[sid] = StepProgress(sid, False, 0, self._clock())
            step.status = str(event.get("status"))
            step.finished = self._clock()
            self.in_flight -= len(step.calls)
            step.calls.clear()
            return step
        if kind == "step_skipped":
            self.skipped.add(str(event.get("step")))
        return None

    def running(self) -> list[StepProgress]:
        return [s for s in self.steps.values() if s.status == "running"]

    def counts(self) -> tuple[int, int, int]:
        """(steps finished or skipped, running, pending)."""
        running = sum(1 for s in self.steps.values() if s.status == "running")
        done = len(self.steps) - running + len(self.skipped - self.steps.keys())
        return done, running, max(len(self.planned) - done - running, 0)


def finished_detail(step: StepProgress | None, event: dict[str, Any]) -> str:
    """``: 12/13 succeeded, 1 failed`` for a fan-out (from the event's counts), else nothing."""
    counts = event.get("counts") or {}
    text = ""
    if step is not None and step.fan_out:
        text = f": {counts.get('succeeded', 0)}/{counts.get('total', 0)} succeeded"
        if counts.get("failed"):
            text += f", {counts['failed']} failed"
        if counts.get("in_doubt"):
            text += f", {counts['in_doubt']} in doubt"
        if counts.get("reused"):
            text += f" ({counts['reused']} from the journal)"
    if event.get("error"):
        text += f": {one_line(event['error'])}"
    return text


# -- the plain view -----------------------------------------------------------------------------------------


class PlainView:
    """Timestamped lines for logs. Times come from the events (``ts``), so the output is a function of the
    event sequence: the same journal gives the same lines.

    ``interval`` bounds how often a fan-out's progress line is written; ``progress=False`` (``--no-progress``)
    drops those lines, keeping starts, finishes, warnings and errors; ``quiet`` keeps only failures and
    log messages at ``error`` and above.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        log_level: str = "warning",
        interval: float = 5.0,
        quiet: bool = False,
        progress: bool = True,
        github: bool = False,
        steps: Iterable[str] = (),
    ) -> None:
        self._stream = stream
        self._threshold = level_index(log_level)
        if quiet:
            self._threshold = max(self._threshold, ERROR_LEVEL)
        self._interval = interval
        self._quiet = quiet
        self._progress = progress and not quiet
        self._github = github
        self._now = 0.0
        self._model = ProgressModel(steps, clock=lambda: self._now)
        self._last_line: dict[str, float] = {}
        self._closed = trio.Event()
        self._repeats = RepeatedFailures()
        self._details: set[str] = set()
        self._last_ts: Any = None

    def _write(self, event: dict[str, Any], text: str) -> None:
        when = _clock_time(event.get("ts"))
        self._last_ts = event.get("ts")
        repeats = self._repeats.take()
        if repeats is not None:
            self._stream.write(f"{when} {repeats}\n")
        self._stream.write(f"{when} {text}\n")
        self._stream.flush()

    def observe(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in ("step_started", "step_finished", "item_succeeded", "item_failed"):
            now = ts_seconds(event.get("ts"))
            if now is not None:
                self._now = now
        step = self._model.observe(event)
        if kind == "item_failed":
            if shows_failure(event) and not self._repeats.absorb(event):
                self._write(event, format_failure(event))
                self._repeats.shown(event)
                detail = error_detail(event.get("error"))
                if detail is not None and detail not in self._details:  # a crash's stderr: once, as it was
                    self._details.add(detail)
                    self._stream.write(detail + "\n")
                    self._stream.flush()
            if not event.get("retrying") and self._github:
                self._stream.write(github_error(event) + "\n")
                self._stream.flush()
            self._progress_line(event, step)
        elif kind == "item_succeeded":
            self._progress_line(event, step)
        elif kind == "log":
            if level_index(event.get("level")) >= self._threshold:
                self._write(event, format_log(event))
        elif kind == "session_failed":
            self._write(event, format_session(event) or "")
            if self._github:
                self._stream.write(github_error(event) + "\n")
                self._stream.flush()
        elif self._quiet:
            return
        elif kind in ("session_opened", "session_lost", "session_retrying"):
            self._write(event, format_session(event) or "")
        elif kind == "step_started":
            assert step is not None
            self._last_line[step.id] = self._now
            text = f"step {step.id} started" + (f": {step.total} items" if step.fan_out else "")
            if step.reused:
                text += f" ({step.reused} done earlier)"
            self._write(event, text)
        elif kind == "step_finished":
            self._write(event, f"step {event.get('step')} {event.get('status')}{finished_detail(step, event)}")
        elif kind == "step_skipped":
            self._write(event, f"step {event.get('step')} skipped: {event.get('reason')}")
        elif kind == "stream_resumed":
            self._write(event, f"{where(event.get('step'), event.get('item'))}: stream resumed")

    def _progress_line(self, event: dict[str, Any], step: StepProgress | None) -> None:
        if step is None or not step.fan_out or not self._progress or step.done >= step.total:
            return
        if self._now - self._last_line.get(step.id, step.started) < self._interval:
            return
        self._last_line[step.id] = self._now
        text = f"step {step.id}: {step.done}/{step.total} items"
        if step.failed or step.in_doubt:
            text += f" ({step.failed} failed" + (f", {step.in_doubt} in doubt" if step.in_doubt else "") + ")"
        rate = step.rate(self._now)
        if rate is not None:
            text += f", {rate:.1f}/s"
            eta = step.eta(self._now)
            if eta is not None:
                text += f", eta {format_duration(eta)}"
        self._write(event, text)

    async def run(self) -> None:
        await self._closed.wait()

    def close(self) -> None:
        repeats = self._repeats.take()
        if repeats is not None:
            self._stream.write(f"{_clock_time(self._last_ts)} {repeats}\n")
            self._stream.flush()
        self._closed.set()


# -- choosing a view ----------------------------------------------------------------------------------------


def wants_live(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """A live view needs a terminal that can move its cursor."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and environ.get("TERM", "") != "dumb"


def make_view(
    args: argparse.Namespace,
    steps: Iterable[str],
    stream: TextIO,
    *,
    environ: Mapping[str, str] | None = None,
) -> View:
    """The view for this command line and terminal. ``steps`` are the plan's step ids, in order."""
    env = os.environ if environ is None else environ
    quiet = bool(getattr(args, "quiet", False))
    no_progress = bool(getattr(args, "no_progress", False))
    log_level = str(getattr(args, "log_level", "warning"))
    github = env.get("GITHUB_ACTIONS") == "true"
    if not quiet and not no_progress and wants_live(stream, env):
        try:
            from runner.view.live import LiveView
        except ImportError:  # rich is missing from a partial install: plain lines still tell the story
            pass
        else:
            return LiveView(stream, steps=steps, log_level=log_level, no_color=bool(env.get("NO_COLOR")))
    return PlainView(stream, log_level=log_level, quiet=quiet, progress=not no_progress, github=github, steps=steps)
