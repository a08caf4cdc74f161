"""The field types of a workflow file for durations and limits: what they accept, how they are written back,
and their JSON schema (:mod:`runner.workflow.model` uses them; :mod:`runner.workflow.durations` parses).

- ``Duration``: seconds (a number > 0) or a string with units (``90s``, ``10m``, ``1h30m``, ``500ms``);
- ``Limit``: a duration, or ``none`` for no limit (``math.inf``; written back as ``none``);
- ``Budget``: a duration, or ``false`` for never (``0``);
- ``Rate``: calls per unit of time, ``20/s``, ``300/min`` or ``1000/h`` (a number: per second); held as calls
  per second.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema
from pydantic_core import PydanticCustomError

from runner.workflow.durations import NO_LIMIT, parse_duration, parse_limit

__all__ = ["Budget", "Duration", "Limit", "Rate", "parse_rate"]

_DURATION_TEXT = r"^\s*((\d+(\.\d+)?|\.\d+)(d|h|m|s|ms))+\s*$"


def _parsed(parse: Callable[[Any], float], value: Any) -> float | None:
    """``value`` parsed (None stays None: the field is unset); a parse error as the loader's ``workflow`` error."""
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError as exc:
        raise PydanticCustomError("workflow", "{message}", {"message": str(exc)}) from None


def _duration(value: Any) -> Any:
    return _parsed(parse_duration, value)


def _limit(value: Any) -> Any:
    return _parsed(parse_limit, value)


def _budget(value: Any) -> Any:
    if value is False:
        return 0.0
    if value is True:
        raise PydanticCustomError(
            "workflow", "{message}", {"message": "expected a duration such as 5m, or false (never reconnect)"}
        )
    return _duration(value)


_RATE_TEXT = r"^\s*(\d+(\.\d+)?|\.\d+)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$"
_PER: dict[str, float] = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}


def parse_rate(value: Any) -> float:
    """Calls per second from ``20/s``, ``300/min``, ``1000/h`` or a number (per second); ``ValueError`` for
    anything else, or a rate that is not above 0.

    >>> parse_rate("30/min")
    0.5
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        per_second = float(value)
    elif isinstance(value, str) and (match := re.match(_RATE_TEXT, value)):
        per_second = float(match.group(1)) / _PER[match.group(3)]
    else:
        raise ValueError(f"expected a rate such as 20/s or 300/min, not {value!r}")
    if not (math.isfinite(per_second) and per_second > 0):
        raise ValueError(f"a rate must be above 0, not {value!r}")
    return per_second


def _rate(value: Any) -> Any:
    return _parsed(parse_rate, value)


def _limit_text(value: float) -> float | str:
    return NO_LIMIT if math.isinf(value) else value


def _schema(description: str, *more: dict[str, Any]) -> WithJsonSchema:
    """The JSON schema of a duration field: seconds or a string with units, and the ``more`` it accepts."""
    return WithJsonSchema(
        {
            "description": description,
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": _DURATION_TEXT},
                *more,
            ],
        }
    )


Duration = Annotated[
    float,
    BeforeValidator(_duration),
    _schema("Seconds (a number > 0) or a string with units: 90s, 10m, 1h, 500ms, 1h30m."),
]
Limit = Annotated[
    float,
    BeforeValidator(_limit),
    PlainSerializer(_limit_text),
    _schema(
        "Seconds (a number > 0), a string with units (90s, 10m, 1h, 500ms), or `none` for no limit.",
        {"const": NO_LIMIT},
    ),
]
Budget = Annotated[
    float,
    BeforeValidator(_budget),
    _schema("How long to keep trying: seconds, a string with units (5m), or false (never).", {"const": False}),
]
Rate = Annotated[
    float,
    BeforeValidator(_rate),
    WithJsonSchema(
        {
            "description": "Calls per unit of time: 20/s, 300/min, 1000/h (a number: calls per second).",
            "anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": _RATE_TEXT}],
        }
    ),
]
