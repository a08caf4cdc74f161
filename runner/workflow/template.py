"""``${{ expr }}`` templates over JMESPath: compiled once, rendered many times.

Syntax
    A template is ``${{ expr }}`` where ``expr`` is a JMESPath expression (the ``jmespath`` package;
    https://jmespath.org). Whitespace inside the braces is ignored.

    * A string that is exactly one template (``"${{ steps.list.json }}"``) renders to the value itself,
      keeping its type: a list stays a list, a number a number, null stays null.
    * A template inside a longer string is interpolated as text: strings as they are, ``null`` as the
      empty string, everything else as compact JSON (``true``, ``3``, ``[1,2]``, ``{"a":1}``).
    * Any JSON-like value may hold templates in its strings, at any depth (:func:`compile_value`).
      Mapping *keys* are never templates.
    * There is no escape sequence; to write a literal ``${{``, use a JMESPath raw string:
      ``${{ '${{' }}``.

Context (the contract with the scheduler)
    Expressions are evaluated against one mapping with these roots (:data:`~runner.workflow.expressions.ROOTS`)::

        inputs   the resolved workflow inputs, by name
        env      the environment variables the workflow refers to (env.NAME), and only those
        steps    steps.<id>: a plain step's view is step_view(result) -> {result, structured, text, json,
                 status}; a fan-out step's view is fanout_view(items, entries) -> {items, results, status}
                 with each entry built by item_entry(...) (all three in :mod:`runner.workflow.context`)
        item     the current item, in a for_each step's args and key only
        index    the current item's position (0-based), likewise

    :func:`runner.workflow.context.make_context` builds it. A name outside these roots is a compile-time
    error, and so is a reference to ``steps`` or ``env`` that does not name a step or variable statically
    (``steps.*``, ``steps[0]``, ``env``): the planner must see every dependency.

Functions
    JMESPath's built-ins and the text, path and JSON functions of :mod:`runner.workflow.functions`
    (``lines``, ``basename``, ``extract``, ...). Calls are checked when compiled as far as the types are
    known then (the number of arguments, literal arguments, a literal regex), and again when rendered.

Truthiness (``if``) follows JMESPath: false, null, "", [] and {} are false; everything else, 0
included, is true (:func:`is_truthy`).

Errors
    :class:`~runner.workflow.expressions.TemplateSyntaxError` (a :class:`~runner.errors.WorkflowError`) at
    compile time, with ``loc`` the position inside the compiled value; :class:`TemplateError` (exit code 1)
    at render time: a rendering failure is a step failure, not an invalid workflow. Its text starts with the
    template's place in the file when the compiler was given ``where`` (the planner gives it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, NamedTuple

from jmespath import exceptions as jp_exceptions
from jmespath.parser import ParsedResult
from jmespath.visitor import Options, TreeInterpreter

from runner.errors import McpRunError
from runner.exitcodes import ExitCode
from runner.quoting import masked
from runner.workflow.expressions import (
    Loc,
    Reference,
    TemplateSyntaxError,
    lower_first,
    parse,
    references,
    shorten,
    shown_expression,
    too_deep,
)
from runner.workflow.functions import FUNCTIONS, describe
from runner.workflow.suggest import did_you_mean

__all__ = [
    "Compiled", "Occurrence", "StepStatus", "TemplateError", "canonical_json", "compile_value", "did_you_mean",
    "is_truthy", "render_text",
]  # fmt: skip

Where = Callable[[Loc], str]
StepStatus = Literal["succeeded", "failed", "skipped"]

_OPEN = "${{"
_CLOSE = "}}"
_MAX_CLOSE_CANDIDATES = 64
_INTERPRETER = TreeInterpreter(Options(custom_functions=FUNCTIONS))


class TemplateError(McpRunError):
    """A template failed while rendering (a function given the wrong type, a for_each that is no list).

    Raised at run time; the step (or item) that rendered it fails.
    """

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, *, expression: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression


class Occurrence(NamedTuple):
    """One reference at one place: ``loc`` inside the compiled value, in the expression ``expression``."""

    reference: Reference
    loc: Loc
    expression: str


# ---------------------------------------------------------------------------------------------------
# Compiled values


class Compiled:
    """A JSON-like value with its templates compiled. Render it with :meth:`render`.

    ``references`` is the set of :class:`Reference` its templates make, ``occurrences`` the same with
    their locations, ``is_constant`` is True when there is no template at all (then :meth:`render`
    returns the source value itself, not a copy: do not mutate what it returns).
    """

    __slots__ = ("is_constant", "occurrences", "source")

    source: Any
    occurrences: tuple[Occurrence, ...]
    is_constant: bool

    def __init__(self, source: Any, occurrences: tuple[Occurrence, ...]) -> None:
        self.source = source
        self.occurrences = occurrences
        self.is_constant = not occurrences

    @property
    def references(self) -> frozenset[Reference]:
        """Made when asked (a few times per template), not kept: a plan of 20,000 steps would hold 40,000 sets."""
        return frozenset(o.reference for o in self.occurrences)

    def render(self, context: Mapping[str, Any]) -> Any:
        """The value with every template replaced by its result in ``context``."""
        return self.source

    @property
    def single_expression(self) -> str | None:
        """The expression text when the value is exactly one template (``"${{ x }}"``), else None."""
        return None

    @property
    def expressions(self) -> tuple[str, ...]:
        """The expression texts in this value, in order (each once), those that read nothing too."""
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source!r})"


class _Expression:
    """One compiled JMESPath expression; ``where`` is its place in the workflow file, for errors."""

    __slots__ = ("_ast", "_field", "_loc", "_where", "text")

    def __init__(self, text: str, parsed: ParsedResult) -> None:
        self.text = text
        self._ast = parsed.parsed
        # A bare name (``item``, ``index``: a fan-out's key and arguments, once per item) is looked up directly:
        # what the interpreter's ``visit_field`` does, without its dispatch.
        self._field: str | None = self._ast["value"] if self._ast["type"] == "field" else None
        self._where: Where | None = None
        self._loc: Loc = ()

    @property
    def where(self) -> str | None:
        """``file:line:column: path``, worked out when an error needs it (most templates never fail)."""
        return self._where(self._loc) if self._where is not None else None

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        if self._field is not None:
            return context.get(self._field)
        try:
            return _INTERPRETER.visit(self._ast, context)
        except (jp_exceptions.JMESPathError, TypeError, ValueError, ArithmeticError, RecursionError) as exc:
            where = f"{self.where}: " if self.where else ""
            if isinstance(exc, RecursionError):
                message = f"{where}{too_deep(self.text)}"
            elif isinstance(exc, jp_exceptions.JMESPathTypeError):  # its text holds the value whole
                expected = " or ".join(map(str, exc.expected_types or ()))
                found = describe(exc.current_value)
                detail = f"{exc.function_name}() expects {expected} values, found {found}"
                message = f"{where}{shown_expression(self.text)}: {detail}"
            else:
                # JMESPath's own messages quote values whole: masked before the first line is taken.
                detail = (masked(str(exc)).splitlines() or [""])[0]
                message = f"{where}{shown_expression(self.text)}: {lower_first(detail)}"
            raise TemplateError(message, expression=self.text) from exc


class _Whole(Compiled):
    __slots__ = ("_expression",)

    def __init__(self, source: str, expression: _Expression, occurrences: tuple[Occurrence, ...]) -> None:
        super().__init__(source, occurrences)
        self._expression = expression
        self.is_constant = False

    def render(self, context: Mapping[str, Any]) -> Any:
        return self._expression.evaluate(context)

    @property
    def single_expression(self) -> str | None:
        return self._expression.text

    @property
    def expressions(self) -> tuple[str, ...]:
        return (self._expression.text,)


class _Interpolated(Compiled):
    __slots__ = ("_expressions", "_literals")

    def __init__(
        self,
        source: str,
        literals: tuple[str, ...],
        expressions: tuple[_Expression, ...],
        occurrences: tuple[Occurrence, ...],
    ) -> None:
        super().__init__(source, occurrences)
        self._literals = literals  # one more than expressions
        self._expressions = expressions
        self.is_constant = False

    def render(self, context: Mapping[str, Any]) -> Any:
        parts = [self._literals[0]]
        for expression, literal in zip(self._expressions, self._literals[1:], strict=True):
            parts.append(render_text(expression.evaluate(context)))
            parts.append(literal)
        return "".join(parts)

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.text for e in self._expressions))


class _Dict(Compiled):
    __slots__ = ("_dynamic",)

    def __init__(
        self, source: dict[str, Any], dynamic: tuple[tuple[str, Compiled], ...], occurrences: tuple[Occurrence, ...]
    ) -> None:
        super().__init__(source, occurrences)
        self._dynamic = dynamic
        self.is_constant = not dynamic

    def render(self, context: Mapping[str, Any]) -> Any:
        out = dict(self.source)
        for key, compiled in self._dynamic:
            out[key] = compiled.render(context)
        return out

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(text for _, compiled in self._dynamic for text in compiled.expressions))


class _List(Compiled):
    __slots__ = ("_dynamic",)

    def __init__(
        self, source: list[Any], dynamic: tuple[tuple[int, Compiled], ...], occurrences: tuple[Occurrence, ...]
    ) -> None:
        super().__init__(source, occurrences)
        self._dynamic = dynamic
        self.is_constant = not dynamic

    def render(self, context: Mapping[str, Any]) -> Any:
        out = list(self.source)
        for index, compiled in self._dynamic:
            out[index] = compiled.render(context)
        return out

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(text for _, compiled in self._dynamic for text in compiled.expressions))


def compile_value(value: Any, *, loc: Loc = (), where: Where | None = None) -> Compiled:
    """Compile every template in ``value`` (a JSON-like value: dicts, lists, strings, scalars).

    Raises :class:`TemplateSyntaxError` for the first template that is not valid; its ``loc`` is ``loc``
    followed by the keys and indexes leading to the bad string. ``where(loc)``, when given, names a
    template's place (``file:line:column: path``) in the errors it raises while rendering.
    """
    if isinstance(value, str):
        return _compile_string(value, loc, where)
    if isinstance(value, dict):
        dynamic_d: list[tuple[str, Compiled]] = []
        occurrences: list[Occurrence] = []
        for key, item in value.items():
            compiled = compile_value(item, loc=(*loc, key), where=where)
            if not compiled.is_constant:
                dynamic_d.append((key, compiled))
                occurrences.extend(compiled.occurrences)
        return _Dict(value, tuple(dynamic_d), tuple(occurrences)) if dynamic_d else Compiled(value, ())
    if isinstance(value, list):
        dynamic_l: list[tuple[int, Compiled]] = []
        occurrences = []
        for index, item in enumerate(value):
            compiled = compile_value(item, loc=(*loc, index), where=where)
            if not compiled.is_constant:
                dynamic_l.append((index, compiled))
                occurrences.extend(compiled.occurrences)
        return _List(value, tuple(dynamic_l), tuple(occurrences)) if dynamic_l else Compiled(value, ())
    return Compiled(value, ())


def _compile_string(text: str, loc: Loc, where: Where | None) -> Compiled:
    if _OPEN not in text:
        return Compiled(text, ())
    literals: list[str] = []
    expressions: list[_Expression] = []
    pos = 0
    for start, end, expression in _split(text, loc):
        literals.append(text[pos:start])
        expression._where, expression._loc = where, loc
        expressions.append(expression)
        pos = end
    literals.append(text[pos:])
    occurrences = tuple(
        Occurrence(reference, loc, expression.text)
        for expression in expressions
        for reference in references(expression._ast, expression.text, loc)
    )
    if len(expressions) == 1 and literals == ["", ""]:
        return _Whole(text, expressions[0], occurrences)
    return _Interpolated(text, tuple(literals), tuple(expressions), occurrences)


def _split(text: str, loc: Loc) -> Iterator[tuple[int, int, _Expression]]:
    """Yield ``(start, end, expression)`` for each ``${{ ... }}`` in ``text``.

    An expression may itself contain ``}}`` (``{a: {b: c}}``, ``'}}'``), so each ``}}`` after the opening
    is tried in turn and the first that closes a valid expression wins.
    """
    pos = 0
    while (start := text.find(_OPEN, pos)) >= 0:
        first_error: TemplateSyntaxError | None = None
        end = text.find(_CLOSE, start + len(_OPEN))
        tries = 0
        found: _Expression | None = None
        while end >= 0 and tries < _MAX_CLOSE_CANDIDATES:
            tries += 1
            source = text[start + len(_OPEN) : end].strip()
            try:
                found = _Expression(source, parse(source, loc))
            except TemplateSyntaxError as exc:
                first_error = first_error or exc
                end = text.find(_CLOSE, end + 1)
                continue
            break
        if found is None:
            if first_error is not None:
                raise first_error
            raise TemplateSyntaxError(f"unclosed template in {shorten(text)!r}: ${{{{ without a matching }}}}", loc=loc)
        end += len(_CLOSE)
        yield start, end, found
        pos = end


# ---------------------------------------------------------------------------------------------------
# Small helpers shared with the planner and the scheduler


def render_text(value: Any) -> str:
    """How a value reads inside a longer string: str as is, null as "", anything else compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if type(value) is int:
        return int.__repr__(value)  # what json writes (a fan-out's items are often numbers: one per item)
    return canonical_json(value, sort_keys=False)


def canonical_json(value: Any, *, sort_keys: bool = True) -> str:
    """Compact JSON text, UTF-8 kept (``ensure_ascii=False``), keys sorted unless asked otherwise."""
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)


def is_truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false; everything else (0 too) is true."""
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True
