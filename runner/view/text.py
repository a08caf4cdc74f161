"""The words and numbers the console shows: one place for how a failure, a log message, a server's state, an
item's place and a time read, used by the plain and live views, the summary, ``show`` and ``logs``.

Formatting works on an event's journal form (:func:`runner.engine.core.events.encode` of an entry, or a line of
the journal): every field reads the same whichever way the event arrived. Counts never come from here: they
come from the run's :class:`~runner.engine.core.state.RunState`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runner.engine.core.events import Entry
from runner.engine.core.vocabulary import FailureKind, SkipCause
from runner.protocol.mcp import LOG_LEVELS
from runner.words import plural
from runner.workflow.keys import LABEL_LIMIT

__all__ = [
    "ERROR_LEVEL",
    "FailureGroup",
    "FailureLines",
    "RepeatedFailures",
    "clock_time",
    "dispatch",
    "error_detail",
    "failure_key",
    "format_elapsed",
    "format_failure",
    "format_group",
    "format_log",
    "format_session",
    "github_error",
    "group_failures",
    "kept_words",
    "kind_words",
    "level_index",
    "one_line",
    "short_key",
    "shows_failure",
    "skip_label",
    "ts_seconds",
    "where",
]


def dispatch(view: object, entry: Entry) -> None:
    """Hand ``entry`` to the method of ``view`` that shows it: ``_on_<type>`` for an event of that ``type`` (the
    journal's name for its class; the method reads the typed event); nothing when ``view`` has none. A view
    names its handlers as it reads, and one lookup costs what a table's would."""
    handler: Callable[[Entry], None] | None = getattr(view, f"_on_{entry.event.type}", None)
    if handler is not None:
        handler(entry)


def kept_words(reused: int, reconciled: int) -> str:
    """``" (10 reused, 2 reconciled)"``: of an item count's succeeded, those taken from earlier attempts or runs
    and those its reconcile tool settled as done; empty when neither."""
    kept = [f"{n} {word}" for n, word in ((reused, "reused"), (reconciled, "reconciled")) if n]
    return f" ({', '.join(kept)})" if kept else ""


def kind_words(kind: Any) -> str:
    """A failure kind in plain words (``tool-error`` -> ``tool error``); a kind this version does not know,
    or a server's (``connect``), as it is."""
    try:
        return FailureKind.of(str(kind)).words
    except KeyError:
        return str(kind)


def _in_doubt(kind: Any) -> bool:
    try:
        return FailureKind.of(str(kind)).in_doubt
    except KeyError:
        return False


_SKIP_LABELS = {
    SkipCause.CONDITION: "if false",
    SkipCause.DEPENDENCY_SKIPPED: "dependency skipped",
    SkipCause.FAILURE: "after a failure",
    SkipCause.UNFINISHED: "left for a resume",
}


def skip_label(cause: Any) -> str | None:
    """A skip's cause in two or three words (``if false``, ``after a failure``); None when unknown."""
    try:
        return _SKIP_LABELS[SkipCause(str(cause))]
    except ValueError:
        return None


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


def short_key(key: Any, limit: int = LABEL_LIMIT) -> str:
    """An item key as every view shows it: whole when it is a default key (a short scalar or ``#`` and a
    short hash, :mod:`runner.workflow.keys`); a longer ``key`` of the workflow's is cut to ``limit``
    characters, keeping its end (file names end paths; ids end URLs). ``--json`` has keys whole."""
    text = str(key)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def where(step: Any, item: Any, limit: int = LABEL_LIMIT) -> str:
    """``step[item]``, or ``step`` for a step that does not fan out (its one item's key is empty)."""
    if step is None:
        return ""
    return f"{step}[{short_key(item, limit)}]" if item not in (None, "") else str(step)


def format_log(event: dict[str, Any]) -> str:
    """``log warning docs (logger) convert[d1.md]: message``."""
    logger = f" ({event['logger']})" if event.get("logger") else ""
    place = where(event.get("step"), event.get("item"))
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
            f"repeat): {kind_words(event.get('kind'))}: {one_line(event.get('error'))}"
        )
    label = "in doubt" if _in_doubt(event.get("kind")) else "error"
    first = str(event.get("error")).split("\n", 1)[0]  # the rest (a stderr tail) is shown on lines of its own
    return f"{label} {where(event.get('step'), event.get('item'))}: {kind_words(event.get('kind'))}: {one_line(first)}"


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
        label = "not sent" if first.get("kind") == FailureKind.NOT_SENT.value else "failed"
    error = one_line(str(first.get("error") or "").split("\n", 1)[0], 200)
    if len(group.items) == 1:
        place = where(first.get("step"), first.get("item"))
    else:
        shown = ", ".join(short_key(i) for i in group.items[:limit] if i)
        more = ", ..." if len(group.items) > limit else ""
        place = f"{first.get('step')} ({plural(len(group.items), 'item')}: {shown}{more})"
    return f"{label} {place}: {kind_words(first.get('kind'))}: {error}"


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
            shown = ", ".join(short_key(i) for i in self._items[:3] if i)
            more = ", ..." if len(self._items) > 3 else ""
            n = len(self._items)
            if self._key[1].endswith("(retrying)"):
                text = f"... and {n} more of {self._key[0]} called again for the same reason"
            else:
                text = f"... and {plural(n, 'more item', 'more items')} of {self._key[0]} with the same error"
            text += f" ({shown}{more})" if shown else ""
        self._key = None
        self._items = []
        return text


class FailureLines:
    """What a view shows of failed calls: each failure's line, those that repeat it counted instead
    (:class:`RepeatedFailures`: ``repeats.take()`` before showing anything else), and a crash's stderr once."""

    __slots__ = ("_details", "repeats")

    def __init__(self) -> None:
        self.repeats = RepeatedFailures()
        self._details: set[str] = set()

    def show(self, fields: dict[str, Any], line: Callable[[str], None], detail: Callable[[str], None]) -> None:
        """Show the failure ``fields`` (its journal form) through ``line``, and its error's detail, the first
        time it comes, through ``detail``; nothing when it is not shown or repeats the last one."""
        if not shows_failure(fields) or self.repeats.absorb(fields):
            return
        line(format_failure(fields))
        self.repeats.shown(fields)
        text = error_detail(fields.get("error"))
        if text is not None and text not in self._details:
            self._details.add(text)
            detail(text)


def format_session(event: dict[str, Any]) -> str | None:
    """The console line(s) for a ``session_*`` event; None for other events. A failure keeps the server's
    stderr tail on lines of its own."""
    kind = event.get("type")
    server = str(event.get("server"))
    error = _unprefixed(str(event.get("error") or ""), server)
    if kind == "session_opened":
        if event.get("reconnects"):
            return f"server {server} reconnected after {format_elapsed(float(event.get('down_s') or 0))}"
        info = event.get("server_info") or {}
        name = f"{info.get('name', '?')} {info.get('version', '')}".strip()
        line = f"server {server} connected ({name}, protocol {event.get('protocol_version')})"
        era = event.get("era")
        return f"{line}; era chosen because {era}" if era else line
    if kind == "session_lost":
        return f"server {server}: connection lost: {one_line(error)}"
    if kind == "session_retrying":
        delay = float(event.get("delay_s") or 0)
        remaining = float(event.get("remaining_s") or 0)
        return (
            f"server {server}: unreachable ({one_line(error, 200)}); trying again in {delay:.1f}s "
            f"(gives up in {format_elapsed(remaining)})"
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
    message += f"{kind_words(event.get('kind'))}: {one_line(event.get('error'), 1000)}"
    return f"::error title={_escape_property(title)}::{_escape_data(message)}"


def format_elapsed(seconds: float) -> str:
    """A time as the console shows it, rounded: ``0.4s``, ``12s``, ``3m05s``, ``2h07m``. (A duration a workflow
    sets is written by :func:`runner.workflow.durations.format_duration`: exact, ``90s``, ``1h30m``.)"""
    if seconds < 10:
        return f"{max(seconds, 0):.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


_second: tuple[str, int | None] = ("", None)  # the whole second of the last ``ts`` read, and its POSIX seconds


def ts_seconds(ts: Any) -> float | None:
    """An event's ``ts`` (ISO 8601, UTC) as POSIX seconds; None when it is not one.

    A ``ts`` as the event log writes it (``2026-11-29T21:35:12.123Z``) is read from its whole second, parsed
    once per second, and its milliseconds: the same number ``datetime.timestamp()`` gives (it divides whole
    microseconds by a million too), for a fraction of the cost (a plain view reads one per item)."""
    global _second
    if type(ts) is str and len(ts) == 24 and ts[19] == "." and ts[23] == "Z" and ts.isascii() and ts[20:23].isdigit():
        head = ts[:19]
        if head != _second[0]:
            _second = (head, _whole_seconds(head))
        whole = _second[1]
        if whole is not None:
            return (whole * 1_000_000 + int(ts[20:23]) * 1000) / 1_000_000
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _whole_seconds(head: str) -> int | None:
    if "Z" in head:
        return None
    try:
        return int(datetime.fromisoformat(head + "+00:00").timestamp())
    except ValueError:
        return None


def clock_time(ts: Any) -> str:
    """An event's time of day, ``21:35:12`` (UTC)."""
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).strftime("%H:%M:%S")
    except ValueError:
        return str(ts)
