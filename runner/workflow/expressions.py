"""One ``${{ }}`` expression: parsed by JMESPath, checked, and the context roots it reads.

:mod:`runner.workflow.template` finds the expressions in a value and renders them; this module decides
whether one expression is valid (how deep it nests, its JSON literals, its functions, ``!a.b``) and which
:data:`ROOTS` it reads, so the planner sees every dependency. Its errors are :class:`TemplateSyntaxError`
(compile time); the messages quote an expression with :func:`shown_expression`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, NamedTuple

from jmespath import exceptions as jp_exceptions
from jmespath.parser import ParsedResult, Parser

from runner.errors import WorkflowError
from runner.workflow.functions import FUNCTIONS, FunctionError, check_call
from runner.workflow.suggest import did_you_mean

__all__ = [
    "MAX_NESTING", "RECONCILE_ROOTS", "ROOTS", "Loc", "Reference", "TemplateSyntaxError", "extra_roots",
    "lower_first", "parse", "references", "shorten", "shown_expression", "too_deep",
]  # fmt: skip

ROOTS: tuple[str, ...] = ("inputs", "env", "steps", "item", "index")
RECONCILE_ROOTS: tuple[str, ...] = ("key", "args", "result")
"""Roots only a step's ``reconcile:`` templates read (the item's key, the step's rendered arguments, the
reconcile tool's result): allowed while they compile, inside :func:`extra_roots`."""
_EXTRA_ROOTS: ContextVar[tuple[str, ...]] = ContextVar("extra_roots", default=())


@contextmanager
def extra_roots(names: tuple[str, ...]) -> Iterator[None]:
    """Expressions compiled inside may also start from ``names`` (the planner's, for ``reconcile:``)."""
    token = _EXTRA_ROOTS.set(names)
    try:
        yield
    finally:
        _EXTRA_ROOTS.reset(token)


Loc = tuple[str | int, ...]
MAX_NESTING: Final = 100
"""How deeply an expression may nest: brackets (``(``, ``[``, ``{``) and prefix operators (``!``, ``&``) one
inside the other. JMESPath's parser and evaluator recurse once per level (or more); far below Python's
recursion limit, and far above what a workflow needs."""
_EXCERPT = 80  # characters of an expression an error quotes
_NAMES: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
"""Dotted plain names (JMESPath's unquoted identifiers), which JMESPath parses into fields under one subexpression."""
_FUNCTIONS: dict[str, Any] = FUNCTIONS.FUNCTION_TABLE  # JMESPath's, the text functions, the status functions
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


class Reference(NamedTuple):
    """What an expression reads from the context: ``steps.convert.text`` is ``("steps", "convert", "text")``.

    ``name`` and ``field`` are None when the expression stops earlier (``inputs``, ``item``) or reads on
    with something that is not a plain field (``steps.a.*``).
    """

    root: str
    name: str | None
    field: str | None


def parse(source: str, loc: Loc) -> ParsedResult:
    """``source`` parsed, once every check passed; a :class:`TemplateSyntaxError` for the first that fails."""
    if not source:
        raise TemplateSyntaxError(
            "empty template ${{ }}", loc=loc, suggestion="write an expression, like ${{ inputs.name }}"
        )
    if _NAMES.match(source):  # a.b.c, most templates: the tree JMESPath builds, without its lexer and parser
        names = source.split(".")
        fields = [{"type": "field", "children": [], "value": name} for name in names]
        tree: Any = fields[0] if len(fields) == 1 else {"type": "subexpression", "children": fields}
        return ParsedResult(source, tree)
    depth = _nesting(source)
    if depth > MAX_NESTING:
        raise TemplateSyntaxError(too_deep(source, depth), loc=loc, suggestion=_FLATTER)
    _check_literals(source, loc)
    parsed = _jmespath_parse(source, loc)
    try:
        _check_nodes(parsed.parsed, source, loc)
    except RecursionError:
        raise TemplateSyntaxError(too_deep(source), loc=loc, suggestion=_FLATTER) from None
    return parsed


def _jmespath_parse(source: str, loc: Loc) -> ParsedResult:
    """JMESPath's parse of ``source``; each way it fails as a :class:`TemplateSyntaxError` saying where."""
    try:
        return Parser().parse(source)
    except jp_exceptions.LexerError as exc:
        raise TemplateSyntaxError(
            f"invalid expression {shown_expression(source)}: {lower_first(exc.message)} "
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
        raise TemplateSyntaxError(too_deep(source), loc=loc, suggestion=_FLATTER) from None
    except (jp_exceptions.JMESPathError, ValueError, TypeError, KeyError, IndexError) as exc:
        # The parser raises a few plain exceptions for odd input; each is still a bad expression.
        raise TemplateSyntaxError(f"invalid expression {shown_expression(source)}", loc=loc) from exc


_FLATTER = "nest less; a JSON literal (`[[1]]`) may be as deep as you like"


def too_deep(source: str, depth: int | None = None) -> str:
    """The message for an expression nesting past ``MAX_NESTING`` (``depth`` levels, when counted)."""
    levels = f"{depth} levels deep" if depth is not None else "too deeply"
    return f"expression {shown_expression(source)} nests {levels}; mcp-run reads at most {MAX_NESTING} levels"


def shown_expression(source: str) -> str:
    """An expression as an error quotes it: ``${{ source }}``, cut to ``_EXCERPT`` characters (an expression
    can be as long as the file: an error names its place, and shows its start)."""
    return f"${{{{ {shorten(source, _EXCERPT)} }}}}"


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
                    f"invalid expression {shown_expression(source)}: `{shorten(lexeme, 30)}` is not a JSON literal "
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
    return lower_first(message)


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


def references(tree: Any, text: str, loc: Loc) -> list[Reference]:
    """The context roots the expression ``text`` (parsed into ``tree``) reads, found by walking the nodes
    evaluated against the context."""
    found: list[Reference] = []
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        kind = node["type"]
        if kind == "field" or kind in _CHAIN:
            names, _ = _leading(node)
            if names:
                found.append(_reference(names, text, loc))
            elif node["children"]:
                stack.append(node["children"][0])
        elif kind in _SAME_SCOPE:
            stack.extend(node["children"])
        elif kind == "pipe":
            stack.append(node["children"][0])
        elif kind in ("current", "identity"):
            raise TemplateSyntaxError(
                f"{shown_expression(text)} reads the whole context; start from one of {', '.join(ROOTS)}",
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
    roots = ROOTS + _EXTRA_ROOTS.get()
    if root not in roots:
        raise TemplateSyntaxError(
            f"unknown name {root!r} in {shown_expression(text)}: expressions start from one of {', '.join(roots)}",
            loc=loc,
            suggestion=did_you_mean(root, roots),
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


def lower_first(text: str) -> str:
    """``text`` with its first letter lowered, to follow a colon (JMESPath's messages start in capitals)."""
    return text[:1].lower() + text[1:]


def shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters, ``...`` marking the cut (errors quote, they do not copy)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
