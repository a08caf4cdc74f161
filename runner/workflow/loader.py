"""YAML -> :class:`~runner.workflow.model.Workflow`, with the line and column of every key and value.

Entry points::

    load_workflow(path) -> LoadedWorkflow            YAML syntax and schema; no server contacted
    parse_workflow(text, file=...) -> LoadedWorkflow the same from a string
    validate(path_or_loaded, ...) -> Plan            everything: schema, templates, references, cycles,
                                                     and (require_inputs=True) the run's inputs
    load_inputs_file(path) -> dict                   an --inputs-file (YAML or JSON mapping)

Every problem is a :class:`~runner.errors.WorkflowError` naming file, line, column and key path; when
there are several, one :class:`~runner.workflow.positions.WorkflowErrors` lists them all (``.errors``). No input
makes these functions raise anything else.

YAML dialect. The file is composed into nodes by :mod:`runner.workflow.yamlnodes` (libyaml's parser when
available, the pure-Python one otherwise; a syntax error is reported by the pure-Python parser, so messages do
not depend on which is installed), within its limits: 10 MB, 2,000,000 values once aliases are expanded, 100
levels, a million characters in one string (:class:`~runner.workflow.yamlnodes.YamlLimits`, the ``limits``
parameter). The nodes are built by this module, which:

* refuses duplicate keys (PyYAML would silently keep the last, losing a step);
* keeps every mapping key a string as written (``on:``, ``yes:``, ``1:`` are the keys "on", "yes", "1");
* reads only ``true``/``false`` as booleans (YAML 1.2): ``yes``, ``no``, ``on``, ``off`` stay strings;
* keeps timestamps and sexagesimal numbers (``12:30``) as the strings they look like;
* supports anchors, aliases and merge keys (``<<``), and refuses other tags (``!!binary``, ``!foo``);
* locates a value reached through an alias at the alias (``*name``), not at its anchor.
"""

from __future__ import annotations

import difflib
import gc
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from runner.errors import WorkflowError
from runner.workflow.inputs import resolve_inputs
from runner.workflow.model import Input, Server, Step, Workflow
from runner.workflow.plan import Plan, build_plan
from runner.workflow.positions import Loc, Positions, describe, format_path, raise_errors, suggest_identifier
from runner.workflow.template import did_you_mean
from runner.workflow.yamlnodes import DEFAULT_LIMITS, Alias, YamlLimits, compose, read_text

__all__ = [
    "LoadedWorkflow",
    "load_inputs_file",
    "load_workflow",
    "parse_workflow",
    "parse_yaml",
    "validate",
]

_TAG = "tag:yaml.org,2002:"
_MODELS: dict[str, type[BaseModel]] = {"servers": Server, "inputs": Input, "steps": Step}
_YAML11_BOOLEANS = frozenset({"yes", "no", "on", "off", "y", "n"})


@dataclass(frozen=True)
class LoadedWorkflow:
    """A workflow whose shape is valid, and where each of its parts sits in the file."""

    workflow: Workflow
    positions: Positions

    @property
    def file(self) -> str | None:
        return self.positions.file


# ---------------------------------------------------------------------------------------------------
# YAML with positions


def parse_yaml(
    text: str, *, file: str | None = "<string>", fast: bool = True, limits: YamlLimits = DEFAULT_LIMITS
) -> tuple[Any, Positions]:
    """Parse one YAML document into JSON-like data and the :class:`Positions` of its keys and values.

    ``fast=False`` forces the pure-Python parser (the result is the same either way). A document past
    ``limits`` (bytes, values with aliases expanded, depth) is refused: see :mod:`runner.workflow.yamlnodes`.
    """
    node = compose(text, file, limits, fast=fast)
    positions = Positions(file=file)
    if node is None:
        raise WorkflowError("the file is empty", file=file, line=1, column=1)
    builder = _Builder(positions)
    try:
        data = builder.build(node, ())
    except RecursionError:
        raise WorkflowError("the document is nested too deeply", file=file) from None
    raise_errors(builder.errors)
    return data, positions


_INT_DIGITS: Final = sys.get_int_max_str_digits() or 10**9
"""The longest integer Python turns into text (JSON), in decimal digits: 4,300 unless configured."""


class _Builder:
    """Nodes -> Python values, recording positions and refusing what the dialect does not allow."""

    def __init__(self, positions: Positions) -> None:
        self.positions = positions
        self.errors: list[WorkflowError] = []
        self.done: dict[int, Any] = {}  # id(node) -> value, so an alias is built once
        self.active: set[int] = set()
        self.scalars = yaml.constructor.SafeConstructor()

    def error(self, message: str, node: yaml.Node, loc: Loc, suggestion: str | None = None) -> None:
        mark = node.start_mark
        self.errors.append(
            WorkflowError(
                message,
                file=self.positions.file,
                line=mark.line + 1,
                column=mark.column + 1,
                path=_path(loc),
                suggestion=suggestion,
            )
        )

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        if not loc:
            self.positions.values[()] = _mark(node)
        alias, node = node, _target(node)
        key = id(node)
        if key in self.done:
            return self.done[key]
        if key in self.active:
            self.error("a YAML alias refers to the node that contains it", alias, loc)
            return None
        self.active.add(key)
        try:
            if isinstance(node, yaml.MappingNode):
                value: Any = self.mapping(node, loc)
            elif isinstance(node, yaml.SequenceNode):
                value = self.sequence(node, loc)
            else:
                value = self.scalar(node, loc)
        finally:
            self.active.discard(key)
        self.done[key] = value
        return value

    def mapping(self, node: yaml.MappingNode, loc: Loc) -> dict[str, Any]:
        if node.tag != _TAG + "map":
            self.error(f"unsupported YAML tag {node.tag}", node, loc)
        result: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            if isinstance(_target(key_node), yaml.ScalarNode) and key_node.tag == _TAG + "merge":
                self.merge(value_node, loc, merged)
                continue
            if not isinstance(_target(key_node), yaml.ScalarNode):
                self.error("mapping keys must be strings, found a collection", key_node, loc)
                continue
            name = str(_target(key_node).value)
            where = (*loc, name)
            if name in seen:
                first = seen[name].start_mark
                self.error(
                    f"duplicate key {name!r} (first defined at line {first.line + 1})",
                    key_node,
                    where,
                    suggestion="YAML keeps only one of them; rename or remove one",
                )
                continue
            seen[name] = key_node
            self.positions.keys[where] = _mark(key_node)
            self.positions.values[where] = _mark(value_node)  # an alias: where the alias is written
            result[name] = self.build(value_node, where)
        if merged:
            merged.update(result)
            return merged
        return result

    def merge(self, node: yaml.Node, loc: Loc, into: dict[str, Any]) -> None:
        node = _target(node)
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for source in sources:
            if not isinstance(_target(source), yaml.MappingNode):
                self.error("a merge key (<<) takes a mapping or a list of mappings", source, loc)
                continue
            value = self.build(source, loc)
            if isinstance(value, dict):
                for name, item in value.items():
                    into.setdefault(name, item)

    def bad_number(self, text: str, node: yaml.Node, loc: Loc) -> None:
        if len(text) > 40:
            limit = f"an integer has at most {_INT_DIGITS:,} digits"
            self.error(f"a number of {len(text):,} characters cannot be read ({limit})", node, loc)
        else:
            self.error(f"invalid number {text!r}", node, loc)

    def sequence(self, node: yaml.SequenceNode, loc: Loc) -> list[Any]:
        if node.tag != _TAG + "seq":
            self.error(f"unsupported YAML tag {node.tag}", node, loc)
        result = []
        for n, item in enumerate(node.value):
            where = (*loc, n)
            self.positions.values[where] = _mark(item)
            result.append(self.build(item, where))
        return result

    def scalar(self, node: yaml.Node, loc: Loc) -> Any:
        tag = node.tag
        text = str(node.value)
        if tag == _TAG + "str" or tag == "!":
            return text
        if tag == _TAG + "null":
            return None
        if tag == _TAG + "bool":
            lowered = text.lower()
            return lowered == "true" if lowered in ("true", "false") else text
        if tag in (_TAG + "int", _TAG + "float"):
            return text if ":" in text else self.number(text, node, loc)
        if tag in (_TAG + "timestamp", _TAG + "merge", _TAG + "value"):
            return text
        self.error(f"unsupported YAML tag {tag}", node, loc)
        return None

    def number(self, text: str, node: yaml.Node, loc: Loc) -> Any:
        """A YAML int or float as JSON allows it: finite, and with no more digits than Python will print."""
        try:
            number = self.scalars.construct_object(node)
        except (ValueError, yaml.YAMLError):
            return self.bad_number(text, node, loc)
        if isinstance(number, float) and not math.isfinite(number):
            self.error(
                f"{_shown(text)} is not a JSON number: a value cannot be infinite or NaN",
                node,
                loc,
                suggestion=f'quote it to pass a string: "{text}"' if len(text) <= 40 else None,
            )
            return None
        if isinstance(number, int) and number.bit_length() > 3 * _INT_DIGITS and _too_long(number):
            return self.bad_number(text, node, loc)
        return number


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"


def _too_long(number: int) -> bool:
    try:
        str(number)
    except ValueError:
        return True
    return False


def _target(node: yaml.Node) -> yaml.Node:
    """The node an alias names (any other node is itself)."""
    return node.target if isinstance(node, Alias) else node


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _path(loc: Loc) -> str | None:
    return format_path(loc) or None


# ---------------------------------------------------------------------------------------------------
# Workflow files


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: loading and planning make objects that all live on (nodes, positions,
    models, compiled templates), and each collection would walk every one of them again. With collections on,
    a 60,000-step workflow spent more time in them than in the work (compose 6.3 s -> 1.5 s without). Nesting
    and a caller that turned collection off are respected: it is turned back on only by whoever turned it off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_workflow(text: str, *, file: str | None = "<string>", limits: YamlLimits = DEFAULT_LIMITS) -> LoadedWorkflow:
    """YAML text -> a shape-checked workflow with positions (see :func:`load_workflow`)."""
    with _gc_paused():
        return _parse_workflow(text, file=file, limits=limits)


def _parse_workflow(text: str, *, file: str | None, limits: YamlLimits) -> LoadedWorkflow:
    data, positions = parse_yaml(text, file=file, limits=limits)
    if not isinstance(data, dict):
        raise WorkflowError(
            f"expected a mapping at the top of the file, found {describe(data)}", file=file, line=1, column=1
        )
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        raise_errors(_schema_errors(exc, positions))
        raise AssertionError("unreachable: a ValidationError with no errors") from exc
    return LoadedWorkflow(workflow, positions)


def load_workflow(path: str | os.PathLike[str], *, limits: YamlLimits = DEFAULT_LIMITS) -> LoadedWorkflow:
    """Read and shape-check the workflow at ``path``; a :class:`WorkflowError` for any problem."""
    return parse_workflow(read_text(path, "workflow", limits), file=os.fspath(path), limits=limits)


def validate(
    source: str | os.PathLike[str] | LoadedWorkflow,
    *,
    require_inputs: bool = False,
    input_pairs: Sequence[str] = (),
    inputs_file: Mapping[str, Any] | None = None,
) -> Plan:
    """Run every check and return the :class:`~runner.workflow.plan.Plan`.

    Inputs given (``input_pairs`` as ``NAME=VALUE`` strings, ``inputs_file`` already parsed) are always
    checked and resolved into ``plan.input_values``; a missing required input is an error only with
    ``require_inputs=True`` (``mcp-run run``), not for ``mcp-run validate``/``plan``.
    """
    with _gc_paused():
        loaded = source if isinstance(source, LoadedWorkflow) else load_workflow(source)
        plan = build_plan(loaded.workflow, loaded.positions)
    values = resolve_inputs(
        loaded.workflow.inputs,
        input_pairs,
        inputs_file,
        require=require_inputs,
        positions=loaded.positions,
    )
    return replace(plan, input_values=values)


def load_inputs_file(path: str | os.PathLike[str], *, limits: YamlLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Read an inputs file (YAML or JSON) that must hold a mapping of input names to values. A regular file
    only: a FIFO (``<(...)``, ``/dev/stdin`` on a pipe) or a device would make the run wait on whoever writes
    it, or read without end."""
    file = os.fspath(path)
    data, _positions = parse_yaml(read_text(path, "inputs file", limits), file=file, limits=limits)
    if not isinstance(data, dict):
        raise WorkflowError(f"an inputs file holds a mapping of names to values, found {describe(data)}", file=file)
    return data


# ---------------------------------------------------------------------------------------------------
# Pydantic errors -> located WorkflowErrors

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean (true or false)",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _schema_errors(exc: ValidationError, positions: Positions) -> list[WorkflowError]:
    details = exc.errors(include_url=False)
    # A misspelt required key shows up twice (unknown `tol`, missing `tool`): report the typo only.
    misspelt = {
        (*d["loc"][:-1], match)
        for d in details
        if d["type"] == "extra_forbidden"
        for match in difflib.get_close_matches(str(d["loc"][-1]), _allowed_keys(tuple(d["loc"][:-1])), n=1)
    }
    errors: list[WorkflowError] = []
    for detail in details:
        loc: Loc = tuple(detail["loc"])
        if detail["type"] == "missing" and loc in misspelt:
            continue
        errors.append(_detail_error(detail, loc, positions))
    return errors


def _detail_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    """One pydantic error as a located WorkflowError: the error's type picks the wording (a table, so each
    type's sentence reads on its own)."""
    kind = detail["type"]
    if loc and loc[-1] == "[key]":
        return _key_error(loc[:-1], positions)
    if kind in _EXPECTED:
        found = detail.get("input")
        return positions.error(_expected(_EXPECTED[kind], found), loc, suggestion=_type_hint(kind, found))
    wording = _WORDING.get(kind, _generic_error)
    return wording(detail, loc, positions)


def _extra_key_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    name = str(loc[-1])
    allowed = _allowed_keys(loc[:-1])
    hint = did_you_mean(name, allowed) or (f"allowed keys: {', '.join(allowed)}" if allowed else None)
    return positions.error(f"unknown key {name!r}", loc, suggestion=hint, at="key")


def _missing_key_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    name = str(loc[-1])
    hint = "add `version: 1` at the top of the file" if loc == ("version",) else None
    parent = loc[:-1]
    line, column = positions.locate(parent, at="key") if parent else (1, 1)
    return WorkflowError(
        f"missing required key {name!r}",
        file=positions.file,
        line=line,
        column=column,
        path=_path(parent),
        suggestion=hint,
    )


def _workflow_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    ctx = detail.get("ctx") or {}
    return positions.error(str(ctx.get("message", detail["msg"])), loc)


def _minimum_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    ctx = detail.get("ctx") or {}
    return positions.error(_expected(f"a value >= {ctx.get('ge')}", detail.get("input")), loc)


def _too_short_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    ctx = detail.get("ctx") or {}
    return positions.error(f"expected at least {ctx.get('min_length')} item, found none", loc)


def _literal_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    ctx = detail.get("ctx") or {}
    found = detail.get("input")
    expected = str(ctx.get("expected", "")).replace("'", "")
    hint = did_you_mean(str(found), [c.strip() for c in expected.replace(" or ", ",").split(",")])
    return positions.error(f"expected one of {expected}, found {describe(found)}", loc, suggestion=hint)


def _generic_error(detail: ErrorDetails, loc: Loc, positions: Positions) -> WorkflowError:
    message = str(detail["msg"])
    return positions.error(message[:1].lower() + message[1:] + f", found {describe(detail.get('input'))}", loc)


_WORDING: dict[str, Callable[[ErrorDetails, Loc, Positions], WorkflowError]] = {
    "extra_forbidden": _extra_key_error,
    "missing": _missing_key_error,
    "workflow": _workflow_error,
    "greater_than_equal": _minimum_error,
    "too_short": _too_short_error,
    "literal_error": _literal_error,
}


def _expected(what: str, found: Any) -> str:
    return f"expected {what}, found {describe(found)}"


def _type_hint(kind: str, found: Any) -> str | None:
    if kind == "string_type" and isinstance(found, int | float | bool):
        return "quote the value to keep it a string"
    if kind == "bool_type" and isinstance(found, str) and found.lower() in _YAML11_BOOLEANS:
        return "write true or false (yes/no/on/off are strings here)"
    if kind in ("int_type", "float_type") and isinstance(found, str):
        return "write the number without quotes"
    if kind == "list_type" and isinstance(found, str):
        return "write a list: [a, b] or one '- item' per line"
    return None


def _key_error(loc: Loc, positions: Positions) -> WorkflowError:
    name = str(loc[-1])
    what = {"steps": "step id", "inputs": "input name"}.get(str(loc[0]), "name")
    return positions.error(
        f"invalid {what} {name!r}: expected an identifier (letters, digits and _, not starting with a digit)",
        loc,
        suggestion=f"did you mean {suggest_identifier(name)!r}?",
        at="key",
    )


def _allowed_keys(loc: Loc) -> list[str]:
    model: type[BaseModel] | None = None
    if not loc:
        model = Workflow
    elif len(loc) == 2:
        model = _MODELS.get(str(loc[0]))
    if model is None:
        return []
    return [info.alias or name for name, info in model.model_fields.items()]
