"""Durations as workflows write them: a number of seconds, or a string with units.

Accepted forms::

    90          seconds (an int or a float; must be > 0)
    "90s"       seconds          "500ms"    milliseconds
    "10m"       minutes          "1h"       hours
    "7d"        days (a cache's lifetime: ``cache: 7d``)
    "1h30m"     several parts, largest unit first, each unit at most once
    "1.5s"      fractions are allowed in every part

A limit (a timeout, a reconnect budget) may also be ``none``: no limit (:func:`parse_limit` gives
``math.inf``). A string without a unit (``"90"``) is refused rather than guessed. Booleans are refused even though
Python counts them as integers. :func:`parse_duration` raises :class:`ValueError` with a message fit to
show to the user; the model turns it into a located :class:`~runner.errors.WorkflowError`.
"""

from __future__ import annotations

import math
import re

__all__ = ["NO_LIMIT", "format_duration", "parse_duration", "parse_limit"]

NO_LIMIT = "none"

_UNITS: dict[str, float] = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_ORDER = ("d", "h", "m", "s", "ms")
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|d|h|m|s)")


def parse_duration(value: object) -> float:
    """Return ``value`` in seconds, or raise :class:`ValueError` saying what was expected and found."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a duration (seconds, or a string like 90s, 10m, 1h, 500ms), found {value!r}")
    if isinstance(value, str):
        return _parse_text(value)
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"expected a positive duration, found {value!r}")
    return seconds


def parse_limit(value: object) -> float:
    """Like :func:`parse_duration`, and ``"none"`` (no limit) gives ``math.inf``."""
    if isinstance(value, str) and value.strip().lower() == NO_LIMIT:
        return math.inf
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{exc} (or `none` for no limit)") from None


def _parse_text(text: str) -> float:
    compact = text.strip()
    pos = 0
    total = 0.0
    last_rank = -1
    while pos < len(compact):
        match = _PART.match(compact, pos)
        if match is None:
            break
        number, unit = match.groups()
        rank = _ORDER.index(unit)
        if rank <= last_rank:
            break
        last_rank = rank
        total += float(number) * _UNITS[unit]
        pos = match.end()
    if not compact or pos != len(compact):
        hint = " (a unit is required: 90s, not 90)" if _looks_numeric(compact) else ""
        raise ValueError(
            f"invalid duration {text!r}: expected a number of seconds or a string like 90s, 10m, 1h, 500ms{hint}"
        )
    if total <= 0:
        raise ValueError(f"expected a positive duration, found {text!r}")
    return total


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def format_duration(seconds: float) -> str:
    """The short text for ``seconds``: ``90s``, ``10m``, ``1h30m``, ``500ms``; ``none`` for no limit."""
    if math.isinf(seconds):
        return NO_LIMIT
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds < 60 or seconds != int(seconds):
        return f"{seconds:g}s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts)
