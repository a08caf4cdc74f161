"""A tool call's arguments against the tool's ``inputSchema``, before anything is sent.

:func:`compile_schema` turns a tool's schema into an :class:`ArgsValidator` once (the draft its ``$schema``
names, 2020-12 when it names none; a schema that is itself invalid raises :class:`InvalidSchema`).
:meth:`ArgsValidator.problems` lists what is wrong with some arguments, each at its path
(``args.out_dir: 3 is not of type 'string'``).

Arguments may hold :class:`~runner.workflow.partial.Unknown` placeholders (``plan --check`` renders what it
knows before the run). A placeholder satisfies every keyword (a text template still must be allowed to be a
string), and only **definite** problems are reported, those that hold whatever the placeholders turn out to
be:

- a problem with a value that holds no placeholder (``3 is not of type 'string'``);
- a problem with the shape of an object or array, which placeholders do not change: a missing required
  argument, an unexpected one, too few or too many items, the wrong type;
- none that comes through a condition (``if``/``then``/``else``, ``dependentSchemas``) when some argument is
  unknown: the condition may read it.

Patterns (``pattern``, ``patternProperties``, and the ``patternProperties`` that ``additionalProperties``
reads) run with the ``regex`` package, which can stop a search: one that runs longer than
:data:`PATTERN_TIMEOUT` raises :class:`PatternTimeout` (the arguments cannot be checked; it blocks the event
loop that long). A pattern that ``regex`` cannot compile, or that fails the template functions' guard (too
long, too large once its counted repeats are written out: :func:`runner.workflow.functions.compile_regex`),
makes the schema unusable (:class:`InvalidSchema`). ``unevaluatedProperties`` is not checked in a schema that
has ``patternProperties``: jsonschema would run those patterns with ``re``, which cannot be stopped. Format
assertions are off (``format: regex`` is not checked in arguments). Both errors are a :class:`CannotCheck`:
the caller sends the call unchecked.

jsonschema is imported on the first compilation, not when a run starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from runner.errors import McpRunError, first_line
from runner.quoting import quote
from runner.workflow.partial import Unknown, contains_unknown
from runner.workflow.positions import format_path
from runner.workflow.suggest import did_you_mean

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = [
    "PATTERN_TIMEOUT", "ArgProblem", "ArgsValidator", "CannotCheck", "InvalidSchema", "PatternTimeout",
    "compile_schema", "describe_problems", "unlisted_arguments",
]  # fmt: skip

PATTERN_TIMEOUT: float = 0.2
"""Seconds a schema's pattern may search one argument (a value, or a key for ``patternProperties``) before it
is stopped. Searches run on the event loop: this bounds how long one call's check can hold up the run."""
MAX_PROBLEMS: Final = 5
# Keywords about an object's or an array's shape: their verdict does not depend on the values inside.
_SHAPE: Final = frozenset({
    "type", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties",
    "dependentRequired", "minItems", "maxItems",
})  # fmt: skip
# Keywords whose subschemas apply only when a condition on the instance holds.
_CONDITIONAL: Final = frozenset({"then", "else", "dependentSchemas", "dependencies"})


class CannotCheck(McpRunError):
    """The arguments cannot be checked against the tool's ``inputSchema``: the call goes out unchecked."""


class InvalidSchema(CannotCheck):
    """A tool's ``inputSchema`` is not a valid JSON Schema (or refers to one that cannot be found, or has a
    pattern that cannot be compiled)."""


class PatternTimeout(CannotCheck):
    """A pattern of the schema searched an argument for longer than :data:`PATTERN_TIMEOUT` and was stopped."""


@dataclass(frozen=True, slots=True)
class ArgProblem:
    """One problem with the arguments: ``path`` inside them (``("files", 2)``), and what is wrong. ``key``:
    the problem is the key at ``path`` (an unexpected argument) or the object there lacks one (a required
    argument), not a value."""

    path: tuple[str | int, ...]
    message: str
    key: bool = False

    @property
    def where(self) -> str:
        """``args``, ``args.out_dir``, ``args.files[2]``."""
        return format_path(("args", *self.path))

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class ArgsValidator:
    """A tool's ``inputSchema``, compiled (see :func:`compile_schema`)."""

    __slots__ = ("_base", "_plain", "_quick", "_schema", "_unusable", "_with_unknowns")

    def __init__(
        self, base: type[Validator] | None, schema: dict[str, Any], *, quick: QuickCheck | None = None
    ) -> None:
        """``quick``: a test that says True only of arguments ``schema`` accepts (:func:`quick_check`); the
        arguments it passes are not validated further. ``base`` None: jsonschema is imported, and the schema
        checked and compiled, the first time the quick test says no (:func:`compile_schema`)."""
        self._base = base
        self._schema = schema
        self._quick = quick
        self._plain: Validator | None = None  # for arguments known in full: every call at run time
        self._with_unknowns: Validator | None = None  # built when arguments hold placeholders (plan --check)
        self._unusable: tuple[type[BaseException], ...] = ()

    def _compiled(self) -> Validator:
        if self._plain is None:
            from jsonschema.exceptions import SchemaError
            from referencing.exceptions import Unresolvable

            self._unusable = (Unresolvable, SchemaError, RecursionError)
            if self._base is None:
                self._base = _checked(self._schema)
            self._plain = self._base(self._schema)
        return self._plain

    def _unknowing(self) -> Validator:
        """The validator for arguments holding placeholders: each keyword skips an :class:`Unknown`."""
        if self._with_unknowns is None:
            self._compiled()
            assert self._base is not None  # set by _compiled
            self._with_unknowns = _with_unknowns(self._base)(self._schema)
        return self._with_unknowns

    def problems(self, args: Any, *, limit: int = MAX_PROBLEMS) -> list[ArgProblem]:
        """The definite problems of ``args`` (see the module docstring), by path, at most ``limit``.

        Raises :class:`InvalidSchema` when the schema turns out to be unusable while checking (a ``$ref``
        that cannot be resolved, a pattern that cannot be compiled), :class:`PatternTimeout` when a pattern
        runs too long on ``args``."""
        if self._quick is not None and self._quick(args):
            return []  # surely valid (a placeholder passes no quick test): the common case, at a fraction of the cost
        unknown = contains_unknown(args)
        validator = self._unknowing() if unknown else self._compiled()
        try:
            errors = [e for e in validator.iter_errors(args) if _definite(e, unknown)]
        except self._unusable as exc:
            raise InvalidSchema(f"its inputSchema cannot be used: {first_line(exc)}") from exc
        problems = sorted((_problem(e) for e in errors), key=lambda p: [str(part) for part in p.path])
        return problems[:limit]


def compile_schema(schema: dict[str, Any]) -> ArgsValidator:
    """Compile a tool's ``inputSchema``; :class:`InvalidSchema` when it is not a valid JSON Schema. A schema of
    the quick test's shape that is surely valid (:func:`surely_valid`) is compiled when a call first fails the
    quick test: a run whose calls all pass it never imports jsonschema."""
    draft = schema.get("$schema", _DEFAULT_DRAFT) if isinstance(schema, dict) else None
    if draft in _QUICK_DRAFTS and surely_valid(schema, draft):
        quick = quick_check(schema)
        if quick is not None:
            return ArgsValidator(None, schema, quick=quick)
    from jsonschema.validators import Draft202012Validator, validator_for

    base = validator_for(schema, default=Draft202012Validator)
    quick = quick_check(schema) if base.META_SCHEMA.get("$schema") in _QUICK_DRAFTS else None
    return ArgsValidator(_checked(schema, base), schema, quick=quick)


def _checked(schema: dict[str, Any], base: type[Validator] | None = None) -> type[Validator]:
    """The validator class for ``schema``, once the schema is checked against its draft's metaschema."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for

    if base is None:
        base = validator_for(schema, default=Draft202012Validator)
    try:
        base.check_schema(schema)
        return _guarded(base, unevaluated=not _mentions(schema, "patternProperties"))
    except SchemaError as exc:
        where = format_path(tuple(exc.path)) or "the schema"
        raise InvalidSchema(f"its inputSchema is not a valid JSON Schema: {where}: {exc.message}") from exc
    except RecursionError as exc:
        raise InvalidSchema("its inputSchema is nested too deeply") from exc


def describe_problems(problems: list[ArgProblem]) -> str:
    """The problems on one line: ``args.a: ...; args.b: ...``."""
    return "; ".join(str(p) for p in problems)


def unlisted_arguments(tool: str, schema: dict[str, Any], args: Any) -> list[str]:
    """Arguments ``schema`` does not name but lets through (most servers ignore them): likely typos, each as
    ``args.time_zone is not an argument of get_current_time; did you mean 'timezone'?``. None for a schema that
    says what it does with other arguments (``additionalProperties``, patterns, ``unevaluatedProperties``)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not isinstance(args, dict) or "additionalProperties" in schema:
        return []
    if schema.get("patternProperties") or schema.get("unevaluatedProperties") is not None:
        return []
    found = []
    for name in args:
        if name not in properties:
            hint = did_you_mean(name, properties) or f"it takes {', '.join(properties) or 'none'}"
            found.append(f"args.{name} is not an argument of {tool}; {hint}")
    return found


# -- the quick test -------------------------------------------------------------------------------------------

QuickCheck = Callable[[Any], bool]

# The drafts whose ``type``, ``properties``, ``required`` and ``additionalProperties`` mean what the quick test
# assumes (draft 3's ``required`` is a property's boolean, and its ``type`` may hold schemas).
_QUICK_DRAFTS: Final = frozenset(
    {
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)
_DEFAULT_DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"  # when ``$schema`` names none
# Keywords that assert nothing about an instance (format assertions are off).
_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "format"}
)
_OBJECT_KEYWORDS: Final = _ANNOTATIONS | {"$schema", "type", "properties", "required", "additionalProperties"}


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # 1.0 is left to jsonschema (drafts differ)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPE_TESTS: Final[dict[str, Callable[[Any], bool]]] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "null": lambda value: value is None,
}


def _value_test(schema: Any) -> Callable[[Any], bool] | None:
    """The test of a property whose schema is ``{}``, ``true`` or a ``type`` (a name or a list of names) with
    annotations only; None for any other schema."""
    if schema is True or schema == {}:
        return lambda value: True
    names = _type_names(schema)
    if names is None:
        return None
    tests = tuple(_TYPE_TESTS[name] for name in names)
    if len(tests) == 1:
        return tests[0]
    return lambda value: any(test(value) for test in tests)


def _type_names(schema: Any) -> list[str] | None:
    """The type names of a schema that is a ``type`` (a name or a non-empty list of names the quick test knows)
    with annotations only; None for any other schema."""
    if not isinstance(schema, dict) or "type" not in schema or not _ANNOTATIONS.issuperset(set(schema) - {"type"}):
        return None
    kind = schema["type"]
    names = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if not names or not all(isinstance(name, str) and name in _TYPE_TESTS for name in names):
        return None
    return names


def quick_check(schema: Any) -> QuickCheck | None:
    """For the schema most tools have (an object; properties each of one simple ``type``; ``required``;
    ``additionalProperties`` true or false; annotations), a test far cheaper than jsonschema that says True
    only of arguments the schema accepts. It says False of anything else (a float for an ``integer``, a
    missing argument, a placeholder...): jsonschema then decides, and words the problems. None for any other
    schema (jsonschema checks every call)."""
    if not isinstance(schema, dict) or not _OBJECT_KEYWORDS.issuperset(schema):
        return None
    if schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or additional not in (True, False, {}):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    tests = _property_tests(properties)
    if tests is None:
        return None
    closed = additional is False
    needed = tuple(required)

    def check(args: Any) -> bool:
        if not isinstance(args, dict):
            return False
        for name in needed:
            if name not in args:
                return False
        for name, value in args.items():
            test = tests.get(name)
            if test is None:
                if closed:
                    return False
            elif not test(value):
                return False
        return True

    return check


def _property_tests(properties: dict[str, Any]) -> dict[str, Callable[[Any], bool]] | None:
    """Each property's :func:`_value_test`; None when one has none."""
    tests: dict[str, Callable[[Any], bool]] = {}
    for name, subschema in properties.items():
        test = _value_test(subschema)
        if test is None:
            return None
        tests[name] = test
    return tests


# What each annotation must be for the schema to be valid (``default`` may be anything).
_ANNOTATION_TYPES: Final[dict[str, type[Any]]] = {
    "title": str, "description": str, "$comment": str, "format": str, "examples": list,
    "deprecated": bool, "readOnly": bool, "writeOnly": bool, "$schema": str,
}  # fmt: skip


def _annotations_valid(schema: dict[str, Any]) -> bool:
    return all(isinstance(schema[name], kind) for name, kind in _ANNOTATION_TYPES.items() if name in schema)


def surely_valid(schema: dict[str, Any], draft: str) -> bool:
    """True only of a schema of the quick test's shape that ``draft``'s metaschema accepts: annotations of
    their types, ``required`` unique names (at least one in draft 4), ``type`` lists unique, and no boolean
    subschema in draft 4. False says nothing (jsonschema checks the schema then)."""
    if not _annotations_valid(schema) or not isinstance(schema.get("properties", {}), dict):
        return False
    draft4 = draft == "http://json-schema.org/draft-04/schema#"
    if not _required_valid(schema.get("required"), draft4):
        return False
    return all(_property_valid(subschema, draft4) for subschema in schema.get("properties", {}).values())


def _required_valid(required: Any, draft4: bool) -> bool:
    """``required`` absent, or a list of unique names (not empty in draft 4)."""
    if required is None:
        return True
    return (
        isinstance(required, list) and len(set(map(str, required))) == len(required) and not (draft4 and not required)
    )


def _property_valid(subschema: Any, draft4: bool) -> bool:
    """A property's schema: ``true`` (not in draft 4), or annotations of their types and a ``type`` list of
    unique names."""
    if subschema is True:
        return not draft4
    if not isinstance(subschema, dict) or not _annotations_valid(subschema):
        return False
    kind = subschema.get("type")
    return not (isinstance(kind, list) and (not kind or len(set(map(str, kind))) != len(kind)))


# -- placeholders --------------------------------------------------------------------------------------------

_EXTENDED: dict[type[Any], type[Any]] = {}

KeywordCheck = Callable[[Any, Any, Any, Any], Iterator[Any] | None]


def _with_unknowns(base: type[Validator]) -> type[Validator]:
    """``base`` with every keyword skipping :class:`Unknown` values (``type`` still checks a text template)."""
    extended = _EXTENDED.get(base)
    if extended is None:
        from jsonschema.validators import extend

        keywords = {name: _skipping(check) for name, check in base.VALIDATORS.items()}
        if "type" in base.VALIDATORS:
            keywords["type"] = _type(base.VALIDATORS["type"])
        extended = _EXTENDED[base] = extend(base, keywords)  # type: ignore[no-untyped-call]
    return extended


def _skipping(check: KeywordCheck) -> KeywordCheck:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(instance, Unknown):
            return
        found = check(validator, value, instance, schema)
        if found is not None:
            yield from found

    return keyword


def _type(check: KeywordCheck) -> KeywordCheck:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        from jsonschema.exceptions import ValidationError

        if isinstance(instance, Unknown):
            types = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
            if instance.text and types and "string" not in types:
                yield ValidationError(f"{instance.source!r} is text, not of type {_or(types)}")
            return
        found = check(validator, value, instance, schema)
        if found is not None:
            yield from found

    return keyword


def _definite(error: ValidationError, any_unknown: bool) -> bool:
    if isinstance(error.instance, Unknown):
        return True  # a text template where no string is allowed
    if any_unknown and _CONDITIONAL.intersection(str(p) for p in error.schema_path):
        return False
    return error.validator in _SHAPE or not contains_unknown(error.instance)


def _problem(error: ValidationError) -> ArgProblem:
    """The error as a problem, in words for the common cases: a missing and an unexpected argument."""
    path = tuple(error.path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    instance = error.instance if isinstance(error.instance, dict) else {}
    worded = None
    if error.validator == "required" and isinstance(error.validator_value, list):
        worded = _missing_problem(error, error.validator_value, path, schema, instance)
    elif error.validator == "additionalProperties" and error.validator_value is False:
        worded = _unexpected_problem(path, schema, instance)
    return worded or ArgProblem(path, first_line(error))


def _what(path: tuple[Any, ...]) -> str:
    return "argument" if not path else "property"


def _missing_problem(
    error: ValidationError,
    names: list[Any],
    path: tuple[Any, ...],
    schema: dict[str, Any],
    instance: dict[str, Any],
) -> ArgProblem | None:
    """``missing required argument 'name' (a string)``, for the name jsonschema's message is about."""
    for name in names:
        if name not in instance and error.message == f"{name!r} is a required property":
            hint = _describe(schema.get("properties", {}).get(name))
            return ArgProblem(path, f"missing required {_what(path)} {name!r}" + (f" ({hint})" if hint else ""), True)
    return None


def _unexpected_problem(path: tuple[Any, ...], schema: dict[str, Any], instance: dict[str, Any]) -> ArgProblem | None:
    """``unexpected argument 'nmae'; did you mean 'name'?``, when no pattern could have allowed it."""
    allowed = list(schema.get("properties", {}))
    extra = [k for k in instance if k not in allowed]
    if not extra or schema.get("patternProperties"):
        return None
    hint = did_you_mean(str(extra[0]), allowed) or (f"it takes {', '.join(allowed)}" if allowed else "it takes none")
    return ArgProblem((*path, extra[0]), f"unexpected {_what(path)} {extra[0]!r}; {hint}", True)


def _describe(schema: Any) -> str | None:
    """``a string``, ``an integer``: what a property's schema says it is, when it says it simply."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    return None


def _or(types: list[Any]) -> str:
    quoted = [repr(t) for t in types]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


# -- patterns ------------------------------------------------------------------------------------------------

_GUARDED: dict[tuple[type[Any], bool], type[Any]] = {}


def _guarded(base: type[Validator], *, unevaluated: bool) -> type[Validator]:
    """``base`` with its pattern keywords searching through :func:`_search` (see the module docstring);
    ``unevaluated``: whether ``unevaluatedProperties`` is checked."""
    extended = _GUARDED.get((base, unevaluated))
    if extended is None:
        from jsonschema.validators import extend

        keywords: dict[str, KeywordCheck] = {}
        for name, check in (
            ("pattern", _pattern),
            ("patternProperties", _pattern_properties),
            ("additionalProperties", _additional_properties),
        ):
            if name in base.VALIDATORS:
                keywords[name] = check
        if not unevaluated and "unevaluatedProperties" in base.VALIDATORS:
            keywords["unevaluatedProperties"] = _unchecked
        extended = _GUARDED[(base, unevaluated)] = extend(base, keywords)  # type: ignore[no-untyped-call]
    return extended


def _search(pattern: Any, text: str) -> bool:
    """Whether ``pattern`` is found in ``text``, within :data:`PATTERN_TIMEOUT` seconds."""
    from runner.workflow.functions import compile_regex

    try:
        compiled = compile_regex(str(pattern))
    except ValueError as exc:
        raise InvalidSchema(f"its inputSchema cannot be used: {exc}") from None
    try:
        return compiled.search(text, timeout=PATTERN_TIMEOUT) is not None
    except TimeoutError:
        raise PatternTimeout(
            f"its inputSchema's pattern {_short(str(pattern))} was stopped after {PATTERN_TIMEOUT:g} s on a text "
            f"of {len(text):,} characters (it backtracks too much)"
        ) from None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's ``additionalProperties``, its ``patternProperties`` searched by :func:`_search`."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key for key in instance if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(_not_allowed(sorted(extras, key=str), schema, patterns))


def _not_allowed(extras: list[Any], schema: Any, patterns: list[Any]) -> str:
    """jsonschema's own message for properties ``additionalProperties: false`` refuses."""
    joined = ", ".join(repr(each) for each in extras)
    if "patternProperties" in schema:
        verb = "does" if len(extras) == 1 else "do"
        return f"{joined} {verb} not match any of the regexes: {', '.join(map(repr, sorted(patterns)))}"
    verb = "was" if len(extras) == 1 else "were"
    return f"Additional properties are not allowed ({joined} {verb} unexpected)"


def _unchecked(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return iter(())


def _mentions(schema: Any, keyword: str) -> bool:
    """Whether ``keyword`` is a key anywhere in ``schema`` (a property of that name counts too)."""
    if isinstance(schema, dict):
        return keyword in schema or any(_mentions(value, keyword) for value in schema.values())
    if isinstance(schema, list):
        return any(_mentions(value, keyword) for value in schema)
    return False


def _short(text: str, limit: int = 40) -> str:
    return quote(text, limit)  # masked, then cut: a secret never shows in part
