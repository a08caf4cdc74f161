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
    Expressions are evaluated against one mapping with these roots (:data:`ROOTS`)::

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
    :class:`TemplateSyntaxError` (a :class:`~runner.errors.WorkflowError`) at compile time, with ``loc``
    the position inside the compiled value; :class:`TemplateError` (exit code 1) at render time: a
    rendering failure is a step failure, not an invalid workflow. Its text starts with the template's
    place in the file when the compiler was given ``where`` (the planner gives it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal, NamedTuple

from jmespath import exceptions as jp_exceptions
from jmespath.parser import ParsedResult, Parser
from jmespath.visitor import Options, TreeInterpreter

from runner.errors import McpRunError, WorkflowError
from runner.exitcodes import ExitCode
from runner.quoting import masked
from runner.workflow.functions import FUNCTIONS, FunctionError, check_call, describe
from runner.workflow.suggest import did_you_mean

__all__ = [
    "ROOTS", "Compiled", "Loc", "Occurrence", "Reference", "StepStatus", "TemplateError", "TemplateSyntaxError",
    "canonical_json", "compile_value", "did_you_mean", "is_truthy", "render_text", "shown_expression",
]  # fmt: skip

ROOTS: tuple[str, ...] = ("inputs", "env", "steps", "item", "index")
Loc = tuple[str | int, ...]
Where = Callable[[Loc], str]
StepStatus = Literal["succeeded", "failed", "skipped"]

_OPEN = "${{"
_CLOSE = "}}"
_MAX_CLOSE_CANDIDATES = 64
MAX_NESTING: Final = 100
"""How deeply an expression may nest: brackets (``(``, ``[``, ``{``) and prefix operators (``!``, ``&``) one
inside the other. JMESPath's parser and evaluator recurse once per level (or more); far below Python's
recursion limit, and far above what a workflow needs."""
_EXCERPT = 80  # characters of an expression an error quotes
_NAMES: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
"""Dotted plain names (JMESPath's unquoted identifiers), which JMESPath parses into fields under one subexpression."""
_FUNCTIONS: dict[str, Any] = FUNCTIONS.FUNCTION_TABLE  # JMESPath's, the text functions, the status functions
_INTERPRETER = TreeInterpreter(Options(custom_functions=FUNCTIONS))
# Nodes whose first child is evaluated against the same value as the node itself, and whose other
# children against something derived from it (so they cannot reach the context roots).
_CHAIN = frozenset(
    {"subexpression", "index_expression", "projection", "value_projection", "filter_projection", "flatten"}
)
# Nodes all of whose children are evaluated against the same value as the node itself.
_SAME_SCOPE = frozenset({
    "or_expression", "and_expression", "not_expression", "comparator", "multi_select_list", "multi_select_dict",
    "key_val_pair", "function_expression",
})  # fmt: skip


class TemplateSyntaxError(WorkflowError):
    """A template that cannot be compiled; ``loc`` is where it sits inside the compiled value."""

    def __init__(self, message: str, *, loc: Loc = (), suggestion: str | None = None) -> None:
        super().__init__(message, suggestion=suggestion)
        self.loc = loc


class TemplateError(McpRunError):
    """A template failed while rendering (a function given the wrong type, a for_each that is no list).

    Raised at run time; the step (or item) that rendered it fails.
    """

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, *, expression: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression


class Reference(NamedTuple):
    """What an expression reads from the context: ``steps.convert.text`` is ``("steps", "convert", "text")``.

    ``name`` and ``field`` are None when the expression stops earlier (``inputs``, ``item``) or reads on
    with something that is not a plain field (``steps.a.*``).
    """

    root: str
    name: str | None
    field: str | None


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

    __slots__ = ("_ast", "_loc", "_where", "text")

    def __init__(self, text: str, parsed: ParsedResult) -> None:
        self.text = text
        self._ast = parsed.parsed
        self._where: Where | None = None
        self._loc: Loc = ()

    @property
    def where(self) -> str | None:
        """``file:line:column: path``, worked out when an error needs it (most templates never fail)."""
        return self._where(self._loc) if self._where is not None else None

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        try:
            return _INTERPRETER.visit(self._ast, context)
        except (jp_exceptions.JMESPathError, TypeError, ValueError, ArithmeticError, RecursionError) as exc:
            where = f"{self.where}: " if self.where else ""
            if isinstance(exc, RecursionError):
                message = f"{where}{_too_deep(self.text)}"
            elif isinstance(exc, jp_exceptions.JMESPathTypeError):  # its text holds the value whole
                expected = " or ".join(map(str, exc.expected_types or ()))
                found = describe(exc.current_value)
                detail = f"{exc.function_name}() expects {expected} values, found {found}"
                message = f"{where}{shown_expression(self.text)}: {detail}"
            else:
                # JMESPath's own messages quote values whole: masked before the first line is taken.
                detail = (masked(str(exc)).splitlines() or [""])[0]
                message = f"{where}{shown_expression(self.text)}: {_lower_first(detail)}"
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
        for reference in _references(expression, loc)
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
            source = text[start + len(_OPEN) : end]
            try:
                found = _parse(source.strip(), loc)
            except TemplateSyntaxError as exc:
                first_error = first_error or exc
                end = text.find(_CLOSE, end + 1)
                continue
            break
        if found is None:
            if first_error is not None:
                raise first_error
            raise TemplateSyntaxError(
                f"unclosed template in {_shorten(text)!r}: ${{{{ without a matching }}}}", loc=loc
            )
        end += len(_CLOSE)
        yield start, end, found
        pos = end


def _parse(source: str, loc: Loc) -> _Expression:
    if not source:
        raise TemplateSyntaxError(
            "empty template ${{ }}", loc=loc, suggestion="write an expression, like ${{ inputs.name }}"
        )
    if _NAMES.match(source):  # a.b.c, most templates: the tree JMESPath builds, without its lexer and parser
        names = source.split(".")
        fields = [{"type": "field", "children": [], "value": name} for name in names]
        tree: Any = fields[0] if len(fields) == 1 else {"type": "subexpression", "children": fields}
        return _Expression(source, ParsedResult(source, tree))
    depth = _nesting(source)
    if depth > MAX_NESTING:
        raise TemplateSyntaxError(_too_deep(source, depth), loc=loc, suggestion=_FLATTER)
    _check_literals(source, loc)
    parsed = _jmespath_parse(source, loc)
    expression = _Expression(source, parsed)
    try:
        _check_nodes(parsed.parsed, source, loc)
    except RecursionError:
        raise TemplateSyntaxError(_too_deep(source), loc=loc, suggestion=_FLATTER) from None
    return expression


def _jmespath_parse(source: str, loc: Loc) -> ParsedResult:
    """JMESPath's parse of ``source``; each way it fails as a :class:`TemplateSyntaxError` saying where."""
    try:
        return Parser().parse(source)
    except jp_exceptions.LexerError as exc:
        raise TemplateSyntaxError(
            f"invalid expression {shown_expression(source)}: {_lower_first(exc.message)} "
            f"at column {exc.lexer_position + 1}",
            loc=loc,
        ) from exc
    except jp_exceptions.IncompleteExpressionError as exc:
        raise TemplateSyntaxError(
            f"invalid expression {shown_expression(source)}: incomplete expression", loc=loc
        ) from exc
    except jp_exceptions.ParseError as exc:
        detail = _parse_detail(exc)
        raise TemplateSyntaxError(
            f"invalid expression {shown_expression(source)}: {detail} at column {exc.lex_position + 1}", loc=loc
        ) from exc
    except RecursionError:
        raise TemplateSyntaxError(_too_deep(source), loc=loc, suggestion=_FLATTER) from None
    except (jp_exceptions.JMESPathError, ValueError, TypeError, KeyError, IndexError) as exc:
        # The parser raises a few plain exceptions for odd input; each is still a bad expression.
        raise TemplateSyntaxError(f"invalid expression {shown_expression(source)}", loc=loc) from exc


_FLATTER = "nest less; a JSON literal (`[[1]]`) may be as deep as you like"


def _too_deep(source: str, depth: int | None = None) -> str:
    levels = f"{depth} levels deep" if depth is not None else "too deeply"
    return f"expression {shown_expression(source)} nests {levels}; mcp-run reads at most {MAX_NESTING} levels"


def shown_expression(source: str) -> str:
    """An expression as an error quotes it: ``${{ source }}``, cut to ``_EXCERPT`` characters (an expression
    can be as long as the file: an error names its place, and shows its start)."""
    return f"${{{{ {_shorten(source, _EXCERPT)} }}}}"


def _nesting(source: str) -> int:
    """How deeply ``source`` nests (see ``MAX_NESTING``): the most brackets open at once, each run of ``!`` or
    ``&`` prefixes counted as that many levels more; quoted text and JSON literals are skipped."""
    deepest = depth = pos = 0
    run = 0  # prefix operators in a row, just before this point
    while pos < len(source):
        char = source[pos]
        if char in "'\"`":
            pos = _skip_quoted(source, pos, char)
            run = 0
            continue
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth + run)
        elif char in ")]}":
            depth -= 1
            run = 0
        elif char in "!&" and _is_prefix(source, pos, char):
            if pos and source[pos - 1] == "&":  # the second & of &&
                run = 0
            else:
                run += 1
                deepest = max(deepest, depth + run)
        elif not char.isspace():
            run = 0
        pos += 1
    return deepest


def _is_prefix(source: str, pos: int, char: str) -> bool:
    """Whether the ``!`` or ``&`` at ``pos`` is a prefix operator (not ``!=``, nor the first ``&`` of ``&&``)."""
    return source[pos + 1 : pos + 2] != ("=" if char == "!" else "&")


def _check_literals(source: str, loc: Loc) -> None:
    """Refuse a backtick literal that is not JSON.

    JMESPath still reads `` `foo` `` as the string "foo" (deprecated, with a warning); we ask for
    ``'foo'`` instead, so a typo in a JSON literal is not silently turned into a string.
    """
    pos = 0
    while pos < len(source):
        char = source[pos]
        if char in "'\"":
            pos = _skip_quoted(source, pos, char)
        elif char == "`":
            end = _skip_quoted(source, pos, "`")
            if end > len(source):
                return  # unclosed: the parser says so
            lexeme = source[pos + 1 : end - 1].replace("\\`", "`")
            try:
                json.loads(lexeme)
            except (ValueError, RecursionError):
                raise TemplateSyntaxError(
                    f"invalid expression {shown_expression(source)}: `{_shorten(lexeme, 30)}` is not a JSON literal "
                    f"at column {pos + 1}",
                    loc=loc,
                    suggestion="write strings as 'text' (or `\"text\"`)",
                ) from None
            pos = end
        else:
            pos += 1


def _skip_quoted(source: str, start: int, quote: str) -> int:
    """The index just past the closing ``quote`` (or the end: the parser reports the unclosed quote)."""
    pos = start + 1
    while pos < len(source):
        if source[pos] == "\\":
            pos += 2
            continue
        if source[pos] == quote:
            return pos + 1
        pos += 1
    return len(source) + 1


def _parse_detail(exc: jp_exceptions.ParseError) -> str:
    message = str(exc.msg)
    if message.startswith("Expecting:"):
        return message.replace("Expecting:", "expected").replace("got:", "found")
    if message.startswith("Unexpected token") or message in ("invalid token", "syntax error"):
        return f"unexpected '{exc.token_value}'"
    return _lower_first(message)


def _check_nodes(node: Any, source: str, loc: Loc) -> None:
    """Refuse unknown functions, calls that cannot work (:func:`~runner.workflow.functions.check_call`), and
    ``!a.b`` (which JMESPath reads as ``(!a).b``)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if not isinstance(current, dict):
            continue
        children = current.get("children") or ()
        if current.get("type") in _CHAIN and children and children[0].get("type") == "not_expression":
            raise TemplateSyntaxError(
                f"{shown_expression(source)}: ! applies only to the name right after it "
                "(JMESPath reads !a.b as (!a).b)",
                loc=loc,
                suggestion="put the path in parentheses: !(a.b)",
            )
        if current.get("type") == "function_expression":
            name = current["value"]
            if name not in _FUNCTIONS:
                raise TemplateSyntaxError(
                    f"unknown function {name}() in {shown_expression(source)}",
                    loc=loc,
                    suggestion=did_you_mean(name, _FUNCTIONS),
                )
            try:
                check_call(current)
            except FunctionError as exc:
                raise TemplateSyntaxError(
                    f"{exc.message} in {shown_expression(source)}", loc=loc, suggestion=f"usage: {exc.usage}"
                ) from None
        stack.extend(current.get("children", ()))


def _references(expression: _Expression, loc: Loc) -> list[Reference]:
    """The context roots ``expression`` reads, found by walking the nodes evaluated against the context."""
    found: list[Reference] = []
    stack: list[Any] = [expression._ast]
    while stack:
        node = stack.pop()
        kind = node["type"]
        if kind == "field" or kind in _CHAIN:
            names, _ = _leading(node)
            if names:
                found.append(_reference(names, expression.text, loc))
            elif node["children"]:
                stack.append(node["children"][0])
        elif kind in _SAME_SCOPE:
            stack.extend(node["children"])
        elif kind == "pipe":
            stack.append(node["children"][0])
        elif kind in ("current", "identity"):
            raise TemplateSyntaxError(
                f"{shown_expression(expression.text)} reads the whole context; start from one of {', '.join(ROOTS)}",
                loc=loc,
                suggestion="name what you use, like inputs.<name> or steps.<id>.text",
            )
        # literal, index, slice, expref: nothing read from the context
    found.reverse()
    return found


def _leading(node: Any) -> tuple[list[str], bool]:
    """The plain field names an access path starts with (``steps.a.json[0]``: steps, a, json), and
    whether the node is nothing but those names."""
    kind = node["type"]
    if kind == "field":
        return [node["value"]], True
    if kind == "subexpression":
        names: list[str] = []
        complete = True
        for child in node["children"]:
            more, complete = _leading(child)
            names.extend(more)
            if not complete:
                break
        return names, complete
    if kind in _CHAIN:
        return _leading(node["children"][0])[0], False
    return [], False


def _reference(names: list[str], text: str, loc: Loc) -> Reference:
    root = names[0]
    name = names[1] if len(names) > 1 else None
    field = names[2] if len(names) > 2 else None
    if root not in ROOTS:
        raise TemplateSyntaxError(
            f"unknown name {root!r} in {shown_expression(text)}: expressions start from one of {', '.join(ROOTS)}",
            loc=loc,
            suggestion=did_you_mean(root, ROOTS),
        )
    if root == "steps" and name is None:
        raise TemplateSyntaxError(
            f"{shown_expression(text)}: references to steps must name a step, like steps.<id>.text", loc=loc
        )
    if root == "env" and name is None:
        raise TemplateSyntaxError(
            f"{shown_expression(text)}: references to env must name a variable, like env.HOME", loc=loc
        )
    return Reference(root, name, field)


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


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
