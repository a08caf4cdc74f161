"""Templates: compile once, render many times; references found statically; errors at the right time."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jmespath.parser import Parser

from runner.errors import WorkflowError
from runner.exitcodes import ExitCode
from runner.workflow.context import fanout_view, item_entry, make_context, step_view
from runner.workflow.expressions import MAX_NESTING, Reference, TemplateSyntaxError
from runner.workflow.template import TemplateError, compile_value, is_truthy, render_text

RESULT = {"content": [{"type": "text", "text": '{"files": ["a.md", "b.md"]}'}], "isError": False}
CONTEXT = make_context(
    inputs={"dir": "docs", "n": 3, "flag": False, "none": None},
    env={"HOME": "/home/me"},
    steps={"list": step_view(RESULT)},
    item={"name": "a.md"},
    index=0,
)


def render(value: Any, context: dict[str, Any] = CONTEXT) -> Any:
    return compile_value(value).render(context)


class TestRendering:
    def test_a_whole_template_keeps_the_type(self) -> None:
        assert render("${{ steps.list.json.files }}") == ["a.md", "b.md"]
        assert render("${{inputs.n}}") == 3
        assert render("${{   inputs.none   }}") is None
        assert render("${{ inputs.flag }}") is False

    def test_interpolation_is_text(self) -> None:
        assert render("dir=${{ inputs.dir }} n=${{ inputs.n }}") == "dir=docs n=3"
        assert render("[${{ inputs.none }}]") == "[]"
        assert render("${{ steps.list.json.files }}!") == '["a.md","b.md"]!'
        assert render('${{ inputs.flag }} ${{ `{"b": 1, "a": 2}` }}') == 'false {"b":1,"a":2}'
        assert render(" ${{ inputs.n }}") == " 3"

    def test_nested_values(self) -> None:
        value = {"path": "${{ inputs.dir }}/${{ item.name }}", "opts": [1, "${{ index }}", {"k": "v"}]}
        assert render(value) == {"path": "docs/a.md", "opts": [1, 0, {"k": "v"}]}
        assert value["opts"] == [1, "${{ index }}", {"k": "v"}]  # the source is never changed

    def test_a_constant_renders_to_itself(self) -> None:
        value = {"a": [1, 2, {"b": "plain"}], "c": None}
        compiled = compile_value(value)
        assert compiled.is_constant and compiled.references == frozenset()
        assert compiled.render(CONTEXT) is value

    def test_constant_parts_are_shared_not_copied(self) -> None:
        big = list(range(1000))
        compiled = compile_value({"big": big, "i": "${{ index }}"})
        out = compiled.render(CONTEXT)
        assert out["big"] is big and out["i"] == 0

    def test_closing_braces_inside_an_expression(self) -> None:
        assert render("${{ {a: {b: inputs.n}} }}") == {"a": {"b": 3}}
        assert render("${{ '}}' }}") == "}}"
        assert render("x${{ '${{' }}y") == "x${{y"  # the way to write a literal ${{

    def test_filters_and_functions(self) -> None:
        assert render("${{ length(steps.list.json.files) }}") == 2
        assert render("${{ steps.list.json.files[?ends_with(@, 'b.md')] | [0] }}") == "b.md"
        assert render("${{ join(',', steps.list.json.files) }}") == "a.md,b.md"

    def test_render_failure_is_a_template_error(self) -> None:
        compiled = compile_value("${{ length(inputs.n) }}")
        with pytest.raises(TemplateError) as info:
            compiled.render(CONTEXT)
        assert info.value.exit_code == ExitCode.FAILED
        assert info.value.expression == "length(inputs.n)"
        assert str(info.value).startswith("${{ length(inputs.n) }}: ")
        assert not isinstance(info.value, WorkflowError)


class TestReferences:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("${{ steps.a.text }}", {Reference("steps", "a", "text")}),
            ("${{ steps.a }}", {Reference("steps", "a", None)}),
            ("${{ steps.a.json[0].name }}", {Reference("steps", "a", "json")}),
            ("${{ steps.a.results[*].text }}", {Reference("steps", "a", "results")}),
            ("${{ steps.a[0] }}", {Reference("steps", "a", None)}),
            ('${{ steps."a".text }}', {Reference("steps", "a", "text")}),
            ("${{ inputs.x || env.Y }}", {Reference("inputs", "x", None), Reference("env", "Y", None)}),
            ("${{ length(steps.a.items) }}", {Reference("steps", "a", "items")}),
            ("${{ {k: item.x, i: index} }}", {Reference("item", "x", None), Reference("index", None, None)}),
            ("${{ inputs }}", {Reference("inputs", None, None)}),
            ("${{ `[1, 2]` }}", set()),
            # Inside a filter or after a pipe, names are relative to the element, not the context.
            ("${{ steps.a.json[?name == steps] }}", {Reference("steps", "a", "json")}),
            ("${{ steps.a.json | steps }}", {Reference("steps", "a", "json")}),
            ("${{ sort_by(steps.a.json, &inputs) }}", {Reference("steps", "a", "json")}),
            (
                "${{ (steps.a.json || steps.b.json).x }}",
                {Reference("steps", "a", "json"), Reference("steps", "b", "json")},
            ),
            (
                "${{ !(inputs.flag) && steps.b.status == 'failed' }}",
                {Reference("inputs", "flag", None), Reference("steps", "b", "status")},
            ),
        ],
    )
    def test_found(self, text: str, expected: set[Reference]) -> None:
        assert compile_value(text).references == expected

    def test_locations(self) -> None:
        compiled = compile_value({"a": ["x", "${{ inputs.q }}"]}, loc=("steps", "s", "args"))
        [occurrence] = compiled.occurrences
        assert occurrence.loc == ("steps", "s", "args", "a", 1)
        assert occurrence.expression == "inputs.q"


NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


class TestDottedNames:
    """``a.b.c`` is built without JMESPath's parser: the tree must be the one the parser builds."""

    @given(
        st.sampled_from(["inputs", "env", "steps", "item"]),
        st.lists(NAME, min_size=1, max_size=5),
        st.sampled_from(["", " "]),
    )
    def test_same_tree_as_jmespath(self, root: str, names: list[str], pad: str) -> None:
        text = ".".join([root, *names])
        compiled = compile_value(f"${{{{{pad}{text}{pad}}}}}")
        assert compiled._expression._ast == Parser().parse(text).parsed  # type: ignore[attr-defined]  # the tree itself

    @pytest.mark.parametrize("text", ["steps.a.text[0]", "steps.a.'b'", 'steps.a."b"', "steps.a . text", "inputs.é"])
    def test_anything_else_goes_to_jmespath(self, text: str) -> None:
        with contextlib.suppress(TemplateSyntaxError):
            compiled = compile_value(f"${{{{ {text} }}}}")
            assert compiled._expression._ast == Parser().parse(text).parsed  # type: ignore[attr-defined]


class TestCompileErrors:
    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("${{ steps.* }}", "${{ steps.* }}: references to steps must name a step, like steps.<id>.text"),
            ("${{ steps[0] }}", "${{ steps[0] }}: references to steps must name a step, like steps.<id>.text"),
            ("${{ steps }}", "${{ steps }}: references to steps must name a step, like steps.<id>.text"),
            ("${{ env }}", "${{ env }}: references to env must name a variable, like env.HOME"),
            (
                "${{ input.x }}",
                "unknown name 'input' in ${{ input.x }}: expressions start from one of inputs, env, steps, item, index",
            ),
            ("${{ @ }}", "${{ @ }} reads the whole context; start from one of inputs, env, steps, item, index"),
            ("${{ a[ }}", "invalid expression ${{ a[ }}: incomplete expression"),
            ("${{ a ! b }}", "invalid expression ${{ a ! b }}: unexpected '!' at column 3"),
            ("${{ a b }}", "invalid expression ${{ a b }}: unexpected 'b' at column 3"),
            ("${{ steps.a.[0 }}", "invalid expression ${{ steps.a.[0 }}: unexpected '0' at column 10"),
            (
                "${{ !inputs.flag }}",
                "${{ !inputs.flag }}: ! applies only to the name right after it (JMESPath reads !a.b as (!a).b)",
            ),
            ("${{ $x }}", "invalid expression ${{ $x }}: unknown token $ at column 1"),
            ("${{ }}", "empty template ${{ }}"),
            ("${{ `foo` }}", "invalid expression ${{ `foo` }}: `foo` is not a JSON literal at column 1"),
            ("${{ a || `[1,` }}", "invalid expression ${{ a || `[1,` }}: `[1,` is not a JSON literal at column 6"),
            ('${{ `"a\\`"` }}', None),  # an escaped backtick inside a literal
            ("${{ '`' }}", None),
            ("${{ `1 }}", "invalid expression ${{ `1 }}: unclosed ` delimiter at column 1"),
            ("ab ${{ inputs.x", "unclosed template in 'ab ${{ inputs.x': ${{ without a matching }}"),
            ("${{ lenght(inputs.x) }}", "unknown function lenght() in ${{ lenght(inputs.x) }}"),
            (
                "${{ length(inputs.x, inputs.y) }}",
                "length() takes 1 argument, found 2 in ${{ length(inputs.x, inputs.y) }}",
            ),
            ("${{ not_null() }}", "not_null() takes at least 1 argument, found 0 in ${{ not_null() }}"),
        ],
    )
    def test_message(self, text: str, message: str | None) -> None:
        if message is None:
            compile_value(text)
            return
        with pytest.raises(TemplateSyntaxError) as info:
            compile_value({"k": [text]}, loc=("args",))
        assert info.value.message == message
        assert info.value.loc == ("args", "k", 0)
        assert isinstance(info.value, WorkflowError)

    def test_suggestions(self) -> None:
        with pytest.raises(TemplateSyntaxError) as info:
            compile_value("${{ lenght(inputs.x) }}")
        assert info.value.suggestion == "did you mean 'length'?"
        with pytest.raises(TemplateSyntaxError) as info:
            compile_value("${{ step.a.text }}")
        assert info.value.suggestion == "did you mean 'steps'?"

    @given(st.text(alphabet=st.sampled_from(list("${}[]().|&!?@*`'\"=<>,: abin0_")), max_size=40))
    def test_any_string_compiles_or_raises_a_syntax_error(self, text: str) -> None:
        try:
            compiled = compile_value(text)
        except TemplateSyntaxError:
            return
        assert compiled.source == text

    @given(st.text(max_size=30))
    def test_any_expression_compiles_or_raises_a_syntax_error(self, expr: str) -> None:
        with contextlib.suppress(TemplateSyntaxError):
            compile_value("${{ " + expr + " }}")


class TestViews:
    def test_step_view(self) -> None:
        result = {
            "content": [
                {"type": "text", "text": "[1,"},
                {"type": "image", "data": "..."},
                {"type": "text", "text": "2]"},
            ],
            "structuredContent": {"n": 2},
            "isError": False,
        }
        view = step_view(result)
        assert view == {
            "result": result,
            "structured": {"n": 2},
            "text": "[1,\n2]",
            "json": [1, 2],
            "status": "succeeded",
        }

    def test_step_view_of_text_that_is_not_json_and_of_an_error(self) -> None:
        view = step_view({"content": [{"type": "text", "text": "hello"}], "isError": True})
        assert view["json"] is None and view["text"] == "hello" and view["status"] == "failed"
        assert view["structured"] is None

    def test_entries_and_fanout(self) -> None:
        skipped = item_entry("skipped", "condition was false")
        assert skipped == {
            "result": None,
            "structured": None,
            "text": None,
            "json": None,
            "status": "skipped",
            "error": "condition was false",
        }
        ok = item_entry("succeeded", None, RESULT)
        assert ok["json"] == {"files": ["a.md", "b.md"]} and ok["error"] is None
        view = fanout_view(["a"], [ok], "succeeded")
        ctx = make_context(inputs={}, env={}, steps={"c": view})
        assert compile_value("${{ steps.c.results[*].json.files[0] }}").render(ctx) == ["a.md"]
        assert compile_value("${{ steps.c.results[?status == 'succeeded'] | length(@) }}").render(ctx) == 1


def test_truthiness_and_text() -> None:
    values: list[Any] = [None, False, "", [], {}, 0, "x", [0], True]
    assert [is_truthy(v) for v in values] == [
        False,
        False,
        False,
        False,
        False,
        True,
        True,
        True,
        True,
    ]
    assert [render_text(v) for v in ("s", None, 1.5, True, [1, "a"])] == ["s", "", "1.5", "true", '[1,"a"]']


def test_arithmetic_overflow_is_a_template_error() -> None:
    compiled = compile_value("${{ floor(to_number('1e999')) }}")
    with pytest.raises(TemplateError):
        compiled.render(make_context(inputs={}, env={}, steps={}))


@given(st.integers(min_value=-(2**100), max_value=2**100) | st.booleans() | st.floats())
def test_a_number_reads_in_text_as_json_writes_it(value: Any) -> None:
    assert render_text(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


NESTED = {
    "brackets": lambda n: "[" * n + "inputs.x" + "]" * n,
    "parentheses": lambda n: "(" * n + "inputs.x" + ")" * n,
    "objects": lambda n: "{a: " * n + "inputs.x" + " }" * n,
    "not": lambda n: "!" * (n - 1) + "(inputs.x)",
    "functions": lambda n: "length(" * n + "inputs.x" + ")" * n,
}


@pytest.mark.parametrize("shape", list(NESTED))
def test_an_expression_nested_past_the_limit_is_refused_by_name_with_a_short_excerpt(shape: str) -> None:
    assert compile_value("${{ " + NESTED[shape](MAX_NESTING) + " }}") is not None  # at the limit: read
    for depth in (MAX_NESTING + 1, 330, 10_000):
        with pytest.raises(TemplateSyntaxError) as caught:
            compile_value("${{ " + NESTED[shape](depth) + " }}", loc=("steps", "a", "args", "v"))
        message = str(caught.value)
        assert f"nests {depth} levels deep; mcp-run reads at most {MAX_NESTING} levels" in message
        assert "invalid expression" not in message and len(message) < 300  # an excerpt, not 40 KB


def test_an_expression_at_the_limit_evaluates() -> None:
    context = make_context(inputs={"x": "a"}, env={}, steps={})
    assert compile_value("${{ " + NESTED["parentheses"](MAX_NESTING) + " }}").render(context) == "a"
    deep = compile_value("${{ " + NESTED["brackets"](MAX_NESTING) + " }}").render(context)
    for _ in range(MAX_NESTING):
        (deep,) = deep
    assert deep == "a"


def test_nesting_the_scanner_does_not_see_is_still_a_clear_error_never_a_traceback() -> None:
    """A chain of 3,000 ``||`` nests as deep in JMESPath's tree without a bracket: Python's recursion limit
    stops it, and the error says so, with an excerpt."""
    expression = " || ".join(["inputs.x"] * 3_000)
    with pytest.raises(TemplateError) as caught:
        compile_value("${{ " + expression + " }}").render(make_context(inputs={"x": None}, env={}, steps={}))
    message = str(caught.value)
    assert f"nests too deeply; mcp-run reads at most {MAX_NESTING} levels" in message and len(message) < 300


def test_quoted_text_and_json_literals_do_not_count_as_nesting() -> None:
    text = "'" + "(" * 500 + "'"
    literal = "`" + "[" * 500 + "]" * 500 + "`"
    assert compile_value("${{ [" + text + ", " + literal + "] }}") is not None


@pytest.mark.parametrize("text", ["item", "index", '"item"', "inputs"])
@given(value=st.none() | st.integers() | st.text(max_size=5) | st.dictionaries(st.text(max_size=3), st.integers()))
def test_a_bare_name_reads_as_the_interpreter_reads_it(text: str, value: Any) -> None:
    """A bare name is looked up without the JMESPath interpreter: the same value, whatever it holds."""
    context = {"item": value, "index": 3, "inputs": {"x": value}}
    expected = Parser().parse(text).search(context)
    assert compile_value(f"${{{{ {text} }}}}").render(context) == expected
    assert compile_value(f"n${{{{ {text} }}}}").render(context) == "n" + render_text(expected)
