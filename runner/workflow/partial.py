"""Rendering what is known before a run: templates over known values are rendered, the rest stand as
:class:`Unknown` placeholders.

``mcp-run plan --check`` renders a step's arguments this way (inputs and environment are known; the item, the
index and other steps' results are not) and checks the result against the tool's ``inputSchema``, skipping the
placeholders (:mod:`runner.workflow.argcheck`). A value is unknown as a whole when any template in its string
reads something unknown; a string with text around its template is still surely a string
(``Unknown.text``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.workflow.expressions import Loc, Reference, TemplateSyntaxError
from runner.workflow.template import TemplateError, compile_value

__all__ = ["Partial", "Unknown", "contains_unknown", "render_known", "what_it_reads"]


@dataclass(frozen=True, slots=True, eq=False)
class Unknown:
    """A value known only at run time. ``loc``: where it sits (as the compiler locates templates);
    ``source``: the string as written; ``reads``: the references it waits for; ``text``: the template sits
    inside longer text, so the value will be a string."""

    loc: Loc
    source: str
    reads: tuple[Reference, ...]
    text: bool

    def __repr__(self) -> str:
        return repr(self.source)


@dataclass(slots=True)
class Partial:
    """A value rendered as far as it can be: ``value`` with :class:`Unknown` placeholders, each listed in
    ``unknowns``; ``errors`` holds the templates over known values that failed to render (their place in
    ``value`` holds an :class:`Unknown` too, so they are not reported twice)."""

    value: Any
    unknowns: list[Unknown] = field(default_factory=list)
    errors: list[tuple[Loc, TemplateError]] = field(default_factory=list)


def render_known(
    value: Any, context: Mapping[str, Any], known: Callable[[Reference], bool], *, loc: Loc = ()
) -> Partial:
    """Render ``value`` (a JSON-like value holding templates, as written in the workflow) in ``context``
    where every reference is ``known``; ``loc`` is where ``value`` sits (``("steps", "a", "args")``)."""
    partial = Partial(None)

    def walk(node: Any, at: Loc) -> Any:
        if isinstance(node, dict):
            return {key: walk(item, (*at, key)) for key, item in node.items()}
        if isinstance(node, list):
            return [walk(item, (*at, n)) for n, item in enumerate(node)]
        if not isinstance(node, str):
            return node
        return _render_string(node, at, context, known, partial)

    partial.value = walk(value, loc)
    return partial


def _render_string(
    node: str, at: Loc, context: Mapping[str, Any], known: Callable[[Reference], bool], partial: Partial
) -> Any:
    """One string of the value: itself when it holds no template, rendered when all it reads is known, else an
    :class:`Unknown` (listed in ``partial``, with the error when rendering failed)."""
    try:
        compiled = compile_value(node, loc=at)
    except TemplateSyntaxError:  # a plan holds only templates that compiled; be safe anyway
        return node
    if compiled.is_constant:
        return node
    reads = tuple(dict.fromkeys(o.reference for o in compiled.occurrences))
    text = compiled.single_expression is None
    if not all(known(ref) for ref in reads):
        unknown = Unknown(at, node, tuple(ref for ref in reads if not known(ref)), text)
        partial.unknowns.append(unknown)
        return unknown
    try:
        return compiled.render(context)
    except TemplateError as exc:
        partial.errors.append((at, exc))
        return Unknown(at, node, (), text)


def contains_unknown(value: Any) -> bool:
    """Whether ``value`` is or holds an :class:`Unknown` (at any depth)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Unknown):
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def what_it_reads(unknown: Unknown) -> str:
    """What an unknown value waits for, in words: ``the item``, ``step list``, ``input 'name'``."""
    words: list[str] = []
    for root, name, _field in unknown.reads:
        if root in ("item", "index"):
            word = "the item"
        elif root == "steps":
            word = f"step {name}"
        elif root == "inputs":
            word = f"input {name!r}, which has no value here"
        else:
            word = f"{root}.{name}" if name else root
        if word not in words:
            words.append(word)
    return " and ".join(words) if words else "values known at run time"
