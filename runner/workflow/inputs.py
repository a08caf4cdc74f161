"""The values of a run's inputs: ``--input NAME=VALUE`` pairs, an inputs file and the workflow's defaults, each
coerced to its declared type (:class:`~runner.workflow.model.Input`) and checked, with every problem reported at
once.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.errors import WorkflowError
from runner.workflow.model import Input, value_has_type
from runner.workflow.positions import Positions, describe, raise_errors

__all__ = ["coerce_input", "resolve_inputs"]

_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})


def resolve_inputs(
    declared: Mapping[str, Input],
    pairs: Sequence[str] = (),
    file_values: Mapping[str, Any] | None = None,
    *,
    require: bool = True,
    positions: Positions | None = None,
) -> dict[str, Any]:
    """The value of every declared input: ``--input`` pairs, over the inputs file, over defaults.

    ``pairs`` are ``NAME=VALUE`` strings, coerced to the input's type: integer and number parse,
    boolean takes true/false/yes/no/1/0, array and object parse JSON. ``file_values`` (an inputs file,
    already parsed) must hold values of the right type; a string there is coerced like a pair. An input
    neither given nor defaulted is null, or, when ``require`` and it is required, an error naming it and
    the flag that sets it. Unknown names are errors; a secret input's value never appears in a message.
    """
    where = positions or Positions()
    errors: list[WorkflowError] = []
    given = _given(declared, pairs, file_values or {}, errors)
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        if name in given:
            values[name] = given[name]
        elif spec.has_default:
            values[name] = spec.default
        elif require and spec.is_required:
            errors.append(_missing_input(name, where))
        else:
            values[name] = None
    raise_errors(errors)
    return values


def _given(
    declared: Mapping[str, Input], pairs: Sequence[str], file_values: Mapping[str, Any], errors: list[WorkflowError]
) -> dict[str, Any]:
    """The inputs the file and then the pairs give, coerced; each problem appended to ``errors``."""
    given: dict[str, Any] = {}
    names = list(declared)
    for name, value in file_values.items():
        if name not in declared:
            errors.append(_unknown_input(str(name), names, "in the inputs file"))
            continue
        _coerce_into(given, name, declared[name], value, errors)
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            errors.append(WorkflowError(f"expected --input NAME=VALUE, found {pair!r}"))
        elif name not in declared:
            errors.append(_unknown_input(name, names, "in --input"))
        else:
            _coerce_into(given, name, declared[name], text, errors)
    return given


def _coerce_into(given: dict[str, Any], name: str, spec: Input, value: Any, errors: list[WorkflowError]) -> None:
    try:
        given[name] = coerce_input(name, spec, value)
    except WorkflowError as exc:
        errors.append(exc)


def _missing_input(name: str, where: Positions) -> WorkflowError:
    return where.error(
        f"missing required input {name!r}",
        ("inputs", name),
        suggestion=f"set it with --input {name}=VALUE or in an inputs file",
        at="key",
    )


def coerce_input(name: str, spec: Input, value: Any) -> Any:
    """``value`` as the input's type; a string is parsed (see :func:`resolve_inputs`)."""
    kind = spec.type
    if value_has_type(value, kind):
        return value
    if isinstance(value, str):
        parsed = _parse_text(kind, value.strip())
        if parsed is not _NOT_PARSED and value_has_type(parsed, kind):
            return parsed
    shown = "a value (hidden: the input is secret)" if spec.secret else describe(value)
    expected = {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "a boolean (true/false/yes/no/1/0)",
        "array": "a JSON array",
        "object": "a JSON object",
    }[kind]
    raise WorkflowError(f"input {name!r}: expected {expected}, found {shown}", path=f"inputs.{name}")


_NOT_PARSED: Any = object()


def _parse_text(kind: str, text: str) -> Any:
    """``text`` read as a ``kind`` (``_NOT_PARSED`` when it cannot be; a string is never parsed)."""
    parse = _PARSERS.get(kind)
    return _NOT_PARSED if parse is None else parse(text)


def _parse_integer(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return _NOT_PARSED


def _parse_number(text: str) -> Any:
    try:
        parsed = float(text) if any(c in text.lower() for c in ".en") else int(text)
    except ValueError:
        return _NOT_PARSED
    return _NOT_PARSED if isinstance(parsed, float) and not math.isfinite(parsed) else parsed


def _parse_boolean(text: str) -> Any:
    return True if text.lower() in _TRUE else False if text.lower() in _FALSE else _NOT_PARSED


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_PARSED


_PARSERS: dict[str, Callable[[str], Any]] = {
    "integer": _parse_integer,
    "number": _parse_number,
    "boolean": _parse_boolean,
    "array": _parse_json,
    "object": _parse_json,
}


def _unknown_input(name: str, names: list[str], where: str) -> WorkflowError:
    matches = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {matches[0]!r}?" if matches else None
    known = ", ".join(names) or "none declared"
    return WorkflowError(f"unknown input {name!r} {where} (inputs: {known})", suggestion=hint)
