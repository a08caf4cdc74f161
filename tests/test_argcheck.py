"""Arguments against a tool's inputSchema, with placeholders for what is known only at run time
(runner/workflow/argcheck.py): only definite problems are reported."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from runner.workflow import argcheck
from runner.workflow.argcheck import InvalidSchema, PatternTimeout, compile_schema
from runner.workflow.context import make_context
from runner.workflow.partial import render_known

CONVERT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "out_dir": {"type": "string"},
        "count": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "options": {
            "type": "object",
            "properties": {"mode": {"enum": ["fast", "slow"]}},
            "additionalProperties": False,
        },
    },
    "required": ["path", "out_dir"],
    "additionalProperties": False,
}


def problems(schema: dict[str, Any], args: dict[str, Any]) -> list[str]:
    """The problems of ``args`` as written (templates over ``item`` or steps unknown, inputs known)."""
    context = make_context(inputs={"out": "build", "three": 3}, env={}, steps={})
    partial = render_known(args, context, lambda ref: ref.root in ("inputs", "env"))
    return [str(p) for p in compile_schema(schema).problems(partial.value)]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"path": "a", "out_dir": "b"}, []),
        ({"path": "${{ item }}", "out_dir": 3}, ["args.out_dir: 3 is not of type 'string'"]),
        ({"path": "${{ item }}", "out_dir": "${{ inputs.three }}"}, ["args.out_dir: 3 is not of type 'string'"]),
        ({"path": "${{ item }}"}, ["args: missing required argument 'out_dir' (a string)"]),
        (
            {"path": "${{ item }}", "out_dir": "x", "pth": 1},
            ["args.pth: unexpected argument 'pth'; did you mean 'path'?"],
        ),
        ({"path": "a", "out_dir": "b", "count": "${{ item }}"}, []),  # any value may come
        (
            {"path": "a", "out_dir": "b", "count": "n-${{ item }}"},
            ["args.count: 'n-${{ item }}' is text, not of type 'integer'"],
        ),
        ({"path": "a", "out_dir": "b", "count": 0}, ["args.count: 0 is less than the minimum of 1"]),
        # an array's length is known even when an element is not; its elements' values are not
        (
            {"path": "a", "out_dir": "b", "tags": ["x", "${{ item }}", "z"]},
            ["args.tags: ['x', '${{ item }}', 'z'] is too long"],
        ),
        ({"path": "a", "out_dir": "b", "tags": [1, "${{ item }}"]}, ["args.tags[0]: 1 is not of type 'string'"]),
        ({"path": "a", "out_dir": "b", "options": {"mode": "${{ item }}"}}, []),
        (
            {"path": "a", "out_dir": "b", "options": {"mode": "quick", "x": "${{ item }}"}},
            [
                "args.options.mode: 'quick' is not one of ['fast', 'slow']",
                "args.options.x: unexpected property 'x'; it takes mode",
            ],
        ),
    ],
)
def test_definite_problems_beside_unknown_values(args: dict[str, Any], expected: list[str]) -> None:
    assert problems(CONVERT, args) == expected


def test_what_depends_on_an_unknown_value_is_not_a_problem() -> None:
    either = {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"required": ["c"]}}
    assert problems(either, {"a": "${{ item }}"}) == []
    assert problems(either, {"c": "${{ item }}"}) == []  # `not` reads the whole object: not definite
    assert problems(either, {"c": 1}) == [
        "args: {'c': 1} is not valid under any of the given schemas",
        "args: {'c': 1} should not be valid under {'required': ['c']}",
    ]
    one = {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"minLength": 1}]}}}
    assert problems(one, {"x": "${{ item }}"}) == []


def test_a_condition_on_an_unknown_value_makes_what_it_implies_uncertain() -> None:
    schema = {
        "type": "object",
        "if": {"properties": {"kind": {"const": "file"}}},
        "then": {"properties": {"size": {"type": "integer"}}},
    }
    assert problems(schema, {"kind": "${{ item }}", "size": "big"}) == []
    assert problems(schema, {"kind": "file", "size": "big"}) == ["args.size: 'big' is not of type 'integer'"]


def test_the_draft_a_schema_names_is_the_one_used() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "dependencies": {"a": ["b"]}}
    assert problems(draft7, {"a": 1}) == ["args: 'b' is a dependency of 'a'"]
    # draft 7 reads `items` as a list of schemas, one per position; 2020-12 would refuse that schema
    positional = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}
    assert compile_schema(positional).problems([1, 2])[0].message == "1 is not of type 'string'"


def test_an_invalid_schema_is_refused_once_compiled_or_when_used() -> None:
    with pytest.raises(InvalidSchema, match=r"not a valid JSON Schema: properties.a.type: 'bogus' is not valid"):
        compile_schema({"type": "object", "properties": {"a": {"type": "bogus"}}})
    unresolvable = compile_schema({"$ref": "https://example.invalid/schema.json"})
    with pytest.raises(InvalidSchema, match=r"cannot be used: Unresolvable: https://example\.invalid/schema\.json"):
        unresolvable.problems({})


def test_problems_are_in_path_order_and_bounded() -> None:
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in "abcdefg"}}
    found = compile_schema(schema).problems({k: 1 for k in "gfedcba"}, limit=3)
    assert [p.where for p in found] == ["args.a", "args.b", "args.c"]


# -- patterns: searched with a time limit ---------------------------------------------------------------------

# (x+x+)+y on a run of x's with no y tries every way to split the run: Python's re would never finish on 5,000.
BACKTRACKS = "(x+x+)+y"
RUN = "x" * 5000


@pytest.fixture
def tiny_pattern_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(argcheck, "PATTERN_TIMEOUT", 0.001)


@pytest.mark.usefixtures("tiny_pattern_timeout")
@pytest.mark.parametrize(
    ("schema", "args"),
    [
        ({"properties": {"name": {"type": "string", "pattern": BACKTRACKS}}}, {"name": RUN}),
        ({"patternProperties": {BACKTRACKS: {"type": "string"}}}, {RUN: "v"}),
        # additionalProperties searches the patternProperties to find which keys are extra
        ({"patternProperties": {BACKTRACKS: {}}, "additionalProperties": False}, {RUN: 1}),
    ],
)
def test_a_pattern_that_backtracks_too_much_is_stopped(schema: dict[str, Any], args: dict[str, Any]) -> None:
    with pytest.raises(PatternTimeout) as raised:
        compile_schema({"type": "object", **schema}).problems(args)
    assert str(raised.value) == (
        "its inputSchema's pattern '(x+x+)+y' was stopped after 0.001 s on a text of 5,000 characters "
        "(it backtracks too much)"
    )


def test_patterns_still_check_what_they_check() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^[a-z]+-[0-9]+$"}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert problems(schema, {"id": "abc-12", "x-a": 1}) == []
    assert problems(schema, {"id": "ABC", "x-a": "one", "y": 1}) == [
        "args: 'y' does not match any of the regexes: '^x-'",
        "args.id: 'ABC' does not match '^[a-z]+-[0-9]+$'",
        "args.x-a: 'one' is not of type 'integer'",
    ]
    assert problems({"properties": {"id": {"pattern": "^a"}}}, {"id": "${{ item }}"}) == []  # any value may come


def test_a_pattern_too_large_to_compile_makes_the_schema_unusable() -> None:
    validator = compile_schema({"properties": {"id": {"pattern": "(?:a{1000}){1000}"}}})
    with pytest.raises(InvalidSchema) as raised:
        validator.problems({"id": "a"})
    assert str(raised.value) == (
        "its inputSchema cannot be used: the regex '(?:a{1000}){1000}' is too large once its counted repeats are "
        "written out (1,000,000 parts, at most 100,000)"
    )


def test_unevaluated_properties_beside_pattern_properties_are_not_checked() -> None:
    """jsonschema would search those patterns with re to find the unevaluated keys, and re cannot be stopped."""
    schema = {"type": "object", "patternProperties": {"^x-": {}}, "unevaluatedProperties": False}
    assert problems(schema, {"x-a": 1, "other": 2}) == []
    plain = {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False}
    assert problems(plain, {"a": 1, "other": 2}) == [
        "args: Unevaluated properties are not allowed ('other' was unexpected)"
    ]


# -- the quick test: True only of arguments jsonschema accepts ------------------------------------------------

_DRAFTS = [
    None,
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2020-12/schema",
]
_TYPES = ["string", "integer", "number", "boolean", "object", "array", "null"]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.sampled_from([1.0, 0.0]) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
_property = st.one_of(
    st.just({}),
    st.just(True),
    st.builds(lambda t, d: {"type": t, **d}, st.sampled_from(_TYPES), st.sampled_from([{}, {"description": "x"}])),
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True)),
)
_names = st.sampled_from(["a", "b", "c"])


@st.composite
def _subset_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": draw(st.dictionaries(_names, _property, max_size=3))}
    draft = draw(st.sampled_from(_DRAFTS))
    if draft is not None:
        schema["$schema"] = draft
    if draw(st.booleans()):
        schema["required"] = draw(st.lists(_names, max_size=3, unique=True))
    additional = draw(st.sampled_from([None, True, False, {}]))
    if additional is not None:
        schema["additionalProperties"] = additional
    return schema


@settings(max_examples=400)
@given(_subset_schemas(), st.dictionaries(_names | st.text(max_size=2), _json, max_size=4) | _json)
def test_the_quick_test_passes_only_what_jsonschema_accepts(schema: dict[str, Any], args: Any) -> None:
    from jsonschema.validators import Draft202012Validator, validator_for

    quick = argcheck.quick_check(schema)
    assert quick is not None  # every schema of this shape has one
    base = validator_for(schema, default=Draft202012Validator)
    assume(base(base.META_SCHEMA).is_valid(schema))  # draft 4 has no boolean schemas
    accepted = base(schema).is_valid(args)
    if quick(args):
        assert accepted
    if accepted or not isinstance(args, dict):
        return
    # refused: problems() words them as jsonschema does, the quick test notwithstanding
    assert compile_schema(schema).problems(args)


@pytest.mark.parametrize(
    ("schema", "args", "quick"),
    [
        (CONVERT, {"path": "a", "out_dir": "b"}, None),  # minimum, items, enum: not the quick test's shape
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1}, True),
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": True}, False),
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1.0}, False),  # drafts differ: jsonschema
        ({"type": "object", "properties": {"n": {"type": "number"}}}, {"n": False}, False),
        ({"type": "object", "required": ["n"]}, {}, False),
        ({"type": "object", "additionalProperties": False}, {"x": 1}, False),
        ({"type": "object", "properties": {"n": {"type": ["string", "null"]}}}, {"n": None}, True),
        ({"properties": {"id": {"type": "string", "pattern": "^a"}}}, {"id": "a"}, None),
        ({"$schema": "http://json-schema.org/draft-03/schema#", "properties": {"a": {"type": "string"}}}, {}, None),
    ],
)
def test_the_quick_test_applies_to_simple_schemas_only(schema: dict[str, Any], args: Any, quick: bool | None) -> None:
    from jsonschema.validators import Draft202012Validator, validator_for

    base = validator_for(schema, default=Draft202012Validator)
    found = argcheck.quick_check(schema) if base.META_SCHEMA.get("$schema") in argcheck._QUICK_DRAFTS else None
    assert (found(args) if found is not None else None) is quick


def test_arguments_the_quick_test_refuses_get_jsonschemas_words() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    validator = compile_schema(schema)
    assert validator.problems({"n": 1}) == []
    assert validator.problems({"n": 1.0}) == []  # 2020-12: an integer
    assert [str(p) for p in validator.problems({"n": True, "m": 1})] == [
        "args.m: unexpected argument 'm'; it takes n",
        "args.n: True is not of type 'integer'",
    ]


_noise = st.sampled_from([None, 5, True, "text", [], ["x"], {}])


@st.composite
def _noisy_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """The quick test's shape with annotations of any type, duplicate or empty lists and boolean subschemas: what a
    server may send, valid or not."""
    schema = draw(_subset_schemas())
    for target in [schema, *[p for p in schema["properties"].values() if isinstance(p, dict)]]:
        for name in draw(st.lists(st.sampled_from(sorted(argcheck._ANNOTATIONS | {"$comment"})), max_size=3)):
            target[name] = draw(_noise | st.text(max_size=3) | st.booleans())
        if "type" in target and target is not schema and draw(st.booleans()):
            target["type"] = draw(st.lists(st.sampled_from(_TYPES), max_size=3))  # maybe empty, maybe repeated
    if draw(st.booleans()):
        schema["required"] = draw(st.lists(_names, max_size=3))  # maybe empty, maybe repeated
    return schema


@settings(max_examples=400)
@given(_noisy_schemas())
def test_a_schema_compiled_lazily_is_valid(schema: dict[str, Any]) -> None:
    """``compile_schema`` defers jsonschema only for schemas their draft's metaschema accepts: the warning about an
    invalid schema is never lost."""
    from jsonschema.validators import Draft202012Validator, validator_for

    draft = schema.get("$schema", "https://json-schema.org/draft/2020-12/schema")
    if argcheck.surely_valid(schema, draft) and argcheck.quick_check(schema) is not None:
        base = validator_for(schema, default=Draft202012Validator)
        assert base(base.META_SCHEMA).is_valid(schema), schema


def test_invalid_schemas_are_not_deferred() -> None:
    for schema in [
        {"type": "object", "title": 5},
        {"type": "object", "required": ["a", "a"]},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": []},
        {"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": True}},
        {"type": "object", "properties": {"a": {"type": ["string", "string"]}}},
        {"type": "object", "properties": {"a": {"type": "string", "description": 3}}},
    ]:
        with pytest.raises(InvalidSchema):
            compile_schema(schema)


def test_a_run_whose_calls_pass_the_quick_test_never_imports_jsonschema() -> None:
    code = """
import sys
from runner.workflow.argcheck import compile_schema
v = compile_schema({"type": "object", "properties": {"n": {"type": "integer", "description": "a count"}},
                    "required": ["n"]})
assert v.problems({"n": 1}) == []
print("jsonschema" in sys.modules)
print([str(p) for p in v.problems({"n": "x"})], "jsonschema" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["False", "[\"args.n: 'x' is not of type 'integer'\"] True"]
