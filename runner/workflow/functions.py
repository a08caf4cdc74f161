"""The functions templates can call: JMESPath's built-ins plus text, path and JSON functions.

Our functions (docs/format.md, "Functions")::

    split(s, sep)  lines(s)  trim(s)  replace(s, old, new)  lower(s)  upper(s)
    matches(s, regex)  extract(s, regex)  basename(p)  dirname(p)  stem(p)  from_json(s)

Checking
    :func:`check_call` runs at compile time on each call in an expression: the function exists (the caller
    reports unknown names), the number of arguments, the type of every argument whose type is known
    before the run (a literal, ``!x``, or a call to one of our functions, which declare what they return),
    and a literal regex (it compiles and passes the guard below). At render time
    :meth:`TemplateFunctions.call_function` checks the number and types of the values themselves. Both
    raise :class:`FunctionError`, whose text names the function, the argument and what was found, and
    ends with the function's usage (:func:`usage`).

Regexes
    Python ``re`` syntax, run by the ``regex`` package (its default ``V0`` mode behaves like ``re``) because
    it can stop a search after a time limit, which ``re`` cannot. The guard (:func:`compile_regex`):
    a pattern is at most :data:`MAX_PATTERN` characters, must parse as a Python ``re`` pattern, and its
    size with counted repeats written out (``(?:a{300}){300}`` is 90,000) is at most :data:`MAX_EXPANDED`
    (``regex`` expands them while compiling, which no time limit covers); a search that runs longer than
    :data:`REGEX_TIMEOUT` seconds is stopped with an error. Nested repeats such as ``(\\w+\\.)+`` are not
    refused: most are harmless, and the time limit stops the ones that are not.

Paths
    ``basename``, ``dirname`` and ``stem`` work on the text, with POSIX rules (``/`` separates; a backslash
    is an ordinary character), like the shell's ``basename`` and ``dirname``: trailing slashes are ignored,
    so ``basename('a/b/')`` is ``b`` and ``dirname('a/b/')`` is ``a``; ``dirname('a')`` is ``.``. Nothing is
    read from the local disk: the paths come from servers.

Adding functions
    Define ``_func_<name>`` methods decorated with :func:`function` on a mixin class, and add the mixin
    to :class:`TemplateFunctions`' bases. The JMESPath metaclass collects every such method into
    ``FUNCTION_TABLE``; the compile-time and render-time checks apply to them with no further change.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from jmespath import exceptions as jp_exceptions
from jmespath.functions import Functions

from runner.quoting import quote
from runner.words import plural
from runner.workflow.status import StatusFunctions

if TYPE_CHECKING:
    import regex

__all__ = [
    "FUNCTIONS", "MAX_EXPANDED", "MAX_PATTERN", "REGEX_TIMEOUT", "FunctionError", "TemplateFunctions",
    "check_call", "compile_regex", "function", "usage",
]  # fmt: skip

# A search that takes longer than this is stopped (seconds, per call of matches() or extract()).
REGEX_TIMEOUT: float = 1.0
# The longest pattern accepted, in characters.
MAX_PATTERN: int = 1000
# The largest pattern accepted once its counted repeats are written out (see _expanded_size).
MAX_EXPANDED: int = 100_000

_F = TypeVar("_F", bound=Callable[..., Any])
_PLAIN_TYPES = ("string", "number", "boolean", "array", "object", "null")


class FunctionError(jp_exceptions.JMESPathError):
    """A function called with something it cannot take: the wrong number or type of arguments, a bad or
    runaway regex, text that is not JSON. ``message`` says what; ``usage`` is the function's signature."""

    def __init__(self, message: str, *, usage: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage

    def __str__(self) -> str:
        return self.message if self.usage is None else f"{self.message}; usage: {self.usage}"


def function(*params: str, returns: str) -> Callable[[_F], _F]:
    """Declare a template function's parameters, as ``"name: type"``, and what it returns.

    A type is a JMESPath type (``string``, ``number``, ``boolean``, ``array``, ``object``, ``null``),
    several joined with ``|``, or ``any``. ``regex`` is a string that must be a valid, guarded pattern:
    a literal one is checked at compile time.
    """

    def record(func: _F) -> _F:
        signature = []
        for param in params:
            name, _, kind = (part.strip() for part in param.partition(":"))
            types = [] if kind == "any" else ["string"] if kind == "regex" else kind.split("|")
            if any(t not in _PLAIN_TYPES for t in types):
                raise ValueError(f"unknown type in {param!r}")
            signature.append({"name": name, "types": types, "regex": kind == "regex"})
        func.signature = tuple(signature)  # type: ignore[attr-defined]  # read by JMESPath's registry
        func.returns = returns  # type: ignore[attr-defined]
        return func

    return record


class TextFunctions(Functions):
    """Text, path and JSON functions (see the module docstring)."""

    @function("s: string", "sep: string", returns="array")
    def _func_split(self, s: str, sep: str) -> list[str]:
        if not sep:
            raise FunctionError("split() needs a separator that is not empty", usage=usage("split"))
        return s.split(sep)

    @function("s: string", returns="array")
    def _func_lines(self, s: str) -> list[str]:
        parts = s.split("\n")
        if parts[-1] == "":
            parts.pop()  # text ending in a newline has no empty last line ("" has no lines at all)
        return [part[:-1] if part.endswith("\r") else part for part in parts]

    @function("s: string", returns="string")
    def _func_trim(self, s: str) -> str:
        return s.strip()

    @function("s: string", "old: string", "new: string", returns="string")
    def _func_replace(self, s: str, old: str, new: str) -> str:
        if not old:
            raise FunctionError("replace() needs an old text that is not empty", usage=usage("replace"))
        return s.replace(old, new)

    @function("s: string", returns="string")
    def _func_lower(self, s: str) -> str:
        return s.lower()

    @function("s: string", returns="string")
    def _func_upper(self, s: str) -> str:
        return s.upper()

    @function("s: string", "regex: regex", returns="boolean")
    def _func_matches(self, s: str, pattern: str) -> bool:
        return _search("matches", s, pattern) is not None

    @function("s: string", "regex: regex", returns="string|null")
    def _func_extract(self, s: str, pattern: str) -> str | None:
        found = _search("extract", s, pattern)
        if found is None:
            return None
        group: str | None = found.group(1 if found.re.groups else 0)
        return group

    @function("p: string", returns="string")
    def _func_basename(self, p: str) -> str:
        return basename(p)

    @function("p: string", returns="string")
    def _func_dirname(self, p: str) -> str:
        stripped = p.rstrip("/")
        if not stripped:
            return "/" if p else "."
        if "/" not in stripped:
            return "."
        return stripped.rsplit("/", 1)[0].rstrip("/") or "/"

    @function("p: string", returns="string")
    def _func_stem(self, p: str) -> str:
        name = basename(p)
        dot = name.rfind(".")
        return name[:dot] if 0 < dot < len(name) - 1 else name

    @function("s: string", returns="any")
    def _func_from_json(self, s: str) -> Any:
        try:
            return json.loads(s, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            raise FunctionError(
                f"from_json() was given text that is not JSON ({_lower_first(exc.msg)} at {where}): {_show(s)}",
                usage=usage("from_json"),
            ) from None
        except (ValueError, RecursionError) as exc:
            raise FunctionError(f"from_json() cannot read {_show(s)}: {exc}", usage=usage("from_json")) from None


class TemplateFunctions(TextFunctions, StatusFunctions):
    """The function table of templates: JMESPath's built-ins, the text and path functions, and the status
    functions of ``if:`` (:mod:`runner.workflow.status`), with readable errors.

    To add functions, add a mixin of ``_func_<name>`` methods (decorated with :func:`function`) to the
    bases of this class.
    """

    def call_function(self, function_name: str, resolved_args: Iterable[Any]) -> Any:
        spec = self.FUNCTION_TABLE.get(function_name)
        if spec is None:
            raise FunctionError(f"unknown function {function_name}()")
        signature = spec["signature"]
        args = list(resolved_args)
        _check_arity(function_name, signature, len(args), self.FUNCTION_TABLE)
        for position, (param, value) in enumerate(zip(signature, args, strict=False), start=1):
            if param["types"] and not any(_has_type(value, kind) for kind in param["types"]):
                raise _type_error(function_name, param, position, describe(value), self.FUNCTION_TABLE)
        return spec["function"](self, *args)


FUNCTIONS = TemplateFunctions()


# ---------------------------------------------------------------------------------------------------
# Checking calls


def usage(name: str, table: Mapping[str, Any] | None = None) -> str:
    """The signature of a function as users read it: ``split(s: string, sep: string) -> array``.

    ``table`` is the function table it is in (by default, that of :data:`FUNCTIONS`)."""
    spec = (FUNCTIONS.FUNCTION_TABLE if table is None else table).get(name)
    if spec is None:
        return f"{name}(...)"
    params = []
    for param in spec["signature"]:
        types = "|".join(param["types"]) or "any"
        if param.get("regex"):
            types = "regex"
        text = f"{param['name']}: {types}" if "name" in param else types
        params.append(f"{text}, ..." if param.get("variadic") else text)
    returns = getattr(spec["function"], "returns", None)
    return f"{name}({', '.join(params)})" + (f" -> {returns}" if returns else "")


def check_call(node: dict[str, Any]) -> None:
    """Check a ``function_expression`` node of a parsed expression, as far as it can be before a run.

    The function must exist (raise nothing otherwise: the caller reports unknown names with a
    suggestion). Raises :class:`FunctionError` for a wrong number of arguments, an argument whose type is
    known and wrong, or a literal regex that the guard refuses.
    """
    name: str = node["value"]
    spec = FUNCTIONS.FUNCTION_TABLE.get(name)
    if spec is None:
        return
    signature = spec["signature"]
    children: list[dict[str, Any]] = node["children"]
    _check_arity(name, signature, len(children))
    for position, (param, child) in enumerate(zip(signature, children, strict=False), start=1):
        _check_argument(name, param, position, child)


def _check_argument(name: str, param: dict[str, Any], position: int, child: dict[str, Any]) -> None:
    """One argument against its parameter: a type known before the run must be one it takes; a literal regex
    must pass the guard."""
    known = _static_type(child)
    if param["types"] and known is not None:
        allowed = {t.split("-", 1)[0] for t in param["types"]}
        if not set(known.split("|")) & allowed:
            shown = describe(child["value"]) if child["type"] == "literal" else f"{_article(known)} {known}"
            raise _type_error(name, param, position, shown)
    if param.get("regex") and child["type"] == "literal" and isinstance(child["value"], str):
        _regex(name, child["value"])


def _check_arity(
    name: str, signature: Sequence[dict[str, Any]], count: int, table: Mapping[str, Any] | None = None
) -> None:
    if signature and signature[-1].get("variadic"):
        if count < len(signature):
            raise FunctionError(
                f"{name}() takes at least {plural(len(signature), 'argument')}, found {count}", usage=usage(name, table)
            )
    elif count != len(signature):
        raise FunctionError(
            f"{name}() takes {plural(len(signature), 'argument')}, found {count}", usage=usage(name, table)
        )


def _static_type(node: dict[str, Any]) -> str | None:
    """The JMESPath type(s) an argument will have, when that is known before the run (else None)."""
    kind = node.get("type")
    if kind == "literal":
        return json_type(node["value"])
    if kind == "not_expression":
        return "boolean"
    if kind == "function_expression":
        spec = FUNCTIONS.FUNCTION_TABLE.get(node["value"])
        returns = getattr(spec["function"], "returns", None) if spec else None
        return None if returns in (None, "any") else returns
    return None


def _has_type(value: Any, kind: str) -> bool:
    """Whether ``value`` is of the signature type ``kind`` (``string``, ``array-number``, ``expref``, ...)."""
    base, _, sub = kind.partition("-")
    if base == "expref":
        return type(value).__name__ == "_Expression"  # what JMESPath passes for &field
    if json_type(value) != base:
        return False
    return not sub or all(json_type(element) == sub for element in value)


def _type_error(
    name: str, param: dict[str, Any], position: int, found: str, table: Mapping[str, Any] | None = None
) -> FunctionError:
    what = param.get("name", f"argument {position}")
    expected = "a string (a regex)" if param.get("regex") else _or([_expected(t) for t in param["types"]])
    return FunctionError(f"{name}() expects {what} to be {expected}, found {found}", usage=usage(name, table))


def json_type(value: Any) -> str:
    """The JMESPath type of a JSON value: string, number, boolean, array, object or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def describe(value: Any) -> str:
    """A value as an error shows it, in JMESPath's words: ``a number (3)``, ``a string ('x')``, ``null``."""
    kind = json_type(value)
    if kind == "null":
        return "null"
    if kind == "string":
        return f"a string ({_show(value)})"
    if kind in ("number", "boolean"):
        return f"{_article(kind)} {kind} ({json.dumps(value)})"
    return f"{_article(kind)} {kind}"


def _expected(kind: str) -> str:
    base, _, sub = kind.partition("-")
    if base == "expref":
        return "an expression (&field)"
    if sub:
        return f"an array of {sub}s"
    return f"{_article(base)} {base}"


def _or(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


# ---------------------------------------------------------------------------------------------------
# Regexes


def compile_regex(pattern: str) -> regex.Pattern[str]:
    """``pattern`` compiled, once it has passed the guard; ``ValueError`` saying why when it does not."""
    if len(pattern) > MAX_PATTERN:
        raise ValueError(
            f"the regex {_show(pattern)} is {len(pattern)} characters long, more than the {MAX_PATTERN} allowed"
        )
    return _compile(pattern)


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> regex.Pattern[str]:
    import regex  # ~20 ms; only workflows that use regexes pay for it

    parser: Any = importlib.import_module("re._parser")  # private, but the one parser of re's syntax
    try:
        parsed = parser.parse(pattern)
        size = _expanded_size(parsed, parser.SubPattern, parser.MAXREPEAT)
    except RecursionError:
        raise ValueError(f"the regex {_show(pattern)} nests too deeply") from None
    except parser.error as exc:
        glob = " (a regex, not a glob: * repeats what comes before it; *.md is \\.md$)" if pattern[:1] == "*" else ""
        raise ValueError(f"invalid regex {_show(pattern)}: {exc}{glob}") from None
    if size > MAX_EXPANDED:
        raise ValueError(
            f"the regex {_show(pattern)} is too large once its counted repeats are written out "
            f"({size:,} parts, at most {MAX_EXPANDED:,})"
        )
    try:
        return regex.compile(pattern, regex.V0)
    except RecursionError:
        raise ValueError(f"the regex {_show(pattern)} nests too deeply") from None
    except regex.error as exc:
        raise ValueError(f"invalid regex {_show(pattern)}: {exc}") from None


def _expanded_size(items: Any, subpattern: type, unbounded: int) -> int:
    """How many parts ``items`` (a parsed pattern) has with every counted repeat written out: ``a{3}`` is
    3, ``(?:ab{2}){10}`` is 30 (the group's 1 + 2, ten times). An open repeat (``a{2,}``, ``a+``) counts
    its lower bound once more, for the loop."""
    total = 0
    for op, arg in items:
        if str(op) in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, body = arg
            times = low + 1 if high == unbounded else high
            total += max(times, 1) * _expanded_size(body, subpattern, unbounded)
        else:
            total += 1 + sum(_expanded_size(sub, subpattern, unbounded) for sub in _nested(arg, subpattern))
    return total


def _nested(arg: Any, subpattern: type) -> list[Any]:
    """The sub-patterns inside one node's argument (a group, the branches of an alternation, ...)."""
    if isinstance(arg, subpattern):
        return [arg]
    if isinstance(arg, tuple | list):
        return [sub for part in arg for sub in _nested(part, subpattern)]
    return []


def _regex(name: str, pattern: str) -> regex.Pattern[str]:
    try:
        return compile_regex(pattern)
    except ValueError as exc:
        raise FunctionError(f"{name}(): {exc}", usage=usage(name)) from None


def _search(name: str, s: str, pattern: str) -> regex.Match[str] | None:
    compiled = _regex(name, pattern)
    try:
        return compiled.search(s, timeout=REGEX_TIMEOUT)
    except TimeoutError:
        raise FunctionError(
            f"{name}(): the regex {_show(pattern)} was stopped after {REGEX_TIMEOUT:g} s on a text of "
            f"{len(s):,} characters; it backtracks too much (nested repeats like (a+)+ can take exponential time)",
            usage=usage(name),
        ) from None


# ---------------------------------------------------------------------------------------------------
# Small helpers


def basename(p: str) -> str:
    """The last part of a POSIX path, trailing slashes ignored (``a/b/`` -> ``b``, ``/`` -> ``/``)."""
    stripped = p.rstrip("/")
    if not stripped:
        return "/" if p else ""
    return stripped.rsplit("/", 1)[-1]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _show(text: str) -> str:
    return quote(text)  # masked, then cut: a secret never shows in part


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
