"""Template functions (runner/workflow/functions.py): what each returns, the errors of a call that cannot work
(at compile time when the types are known, at render time otherwise, located in the file), and the regex guard."""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from typing import Any

import jmespath
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import WorkflowError
from runner.workflow import functions
from runner.workflow.context import make_context
from runner.workflow.expressions import TemplateSyntaxError
from runner.workflow.loader import parse_workflow, validate
from runner.workflow.template import TemplateError, compile_value
from tests.harness import Harness, echo_tools, plan_of, run_plan


def render(expression: str, **inputs: Any) -> Any:
    """``${{ expression }}`` rendered with ``inputs``."""
    return compile_value("${{ " + expression + " }}").render(make_context(inputs=inputs, env={}, steps={}))


def call(name: str, *args: Any) -> Any:
    """``name(args...)`` with every argument passed through the context (so nothing is checked statically)."""
    names = [f"a{n}" for n in range(len(args))]
    expression = f"{name}({', '.join('inputs.' + n for n in names)})"
    return render(expression, **dict(zip(names, args, strict=True)))


def compile_error(expression: str) -> TemplateSyntaxError:
    with pytest.raises(TemplateSyntaxError) as info:
        compile_value("${{ " + expression + " }}")
    return info.value


def render_error(expression: str, **inputs: Any) -> str:
    with pytest.raises(TemplateError) as info:
        render(expression, **inputs)
    return str(info.value)


class TestExamples:
    @pytest.mark.parametrize(
        ("name", "args", "expected"),
        [
            ("split", ("a,b,,c", ","), ["a", "b", "", "c"]),
            ("split", ("a::b", "::"), ["a", "b"]),
            ("split", ("", ","), [""]),  # like Python's str.split
            ("split", ("née,été", ","), ["née", "été"]),
            ("lines", ("a\nb\n",), ["a", "b"]),
            ("lines", ("a\nb",), ["a", "b"]),  # a last line without a newline is kept
            ("lines", ("a\r\nb\r\n",), ["a", "b"]),  # CRLF
            ("lines", ("a\n\nb\n\n",), ["a", "", "b", ""]),  # only the one trailing empty line goes
            ("lines", ("",), []),
            ("lines", ("\n",), [""]),
            ("lines", ("a\rb",), ["a\rb"]),  # a lone CR is not a line break
            ("lines", ("x\u2028y",), ["x\u2028y"]),  # nor is a Unicode separator
            ("trim", ("  a b \t\r\n",), "a b"),
            ("trim", ("\u00a0é\u3000",), "é"),  # Unicode spaces
            ("trim", ("",), ""),
            ("replace", ("a.b.c", ".", "/"), "a/b/c"),
            ("replace", ("a+b", "+", ""), "ab"),
            ("replace", ("(x)", "(x)", "[y]"), "[y]"),  # literal, not a regex
            ("replace", ("", "a", "b"), ""),
            ("lower", ("ÉTÉ Abc",), "été abc"),
            ("upper", ("straße",), "STRASSE"),
            ("lower", ("",), ""),
            ("matches", ("report-2024.md", r"\.md$"), True),
            ("matches", ("report.txt", r"\.md$"), False),
            ("matches", ("", "^$"), True),
            ("matches", ("été", r"^\w+$"), True),  # \w is Unicode, as in Python's re
            ("extract", ("v1.22.3", r"v(\d+)\.(\d+)"), "1"),  # the first group
            ("extract", ("v1.22.3", r"\d+\.\d+"), "1.22"),  # no group: the whole match
            ("extract", ("abc", r"\d+"), None),  # no match: null
            ("extract", ("ab", r"a(x)?b"), None),  # the group took no part
            ("extract", ("id=é42", r"id=(?P<id>\w+)"), "é42"),
            ("basename", ("/srv/docs/a.md",), "a.md"),
            ("basename", ("a/b/",), "b"),  # trailing slashes ignored
            ("basename", ("a.md",), "a.md"),
            ("basename", ("/",), "/"),
            ("basename", ("",), ""),
            ("basename", ("C:\\docs\\a.md",), "C:\\docs\\a.md"),  # POSIX: a backslash is a character
            ("dirname", ("/srv/docs/a.md",), "/srv/docs"),
            ("dirname", ("a/b/",), "a"),
            ("dirname", ("a",), "."),
            ("dirname", ("/a",), "/"),
            ("dirname", ("a//b",), "a"),
            ("dirname", ("/",), "/"),
            ("dirname", ("",), "."),
            ("stem", ("docs/a.tar.gz",), "a.tar"),
            ("stem", ("docs/readme",), "readme"),
            ("stem", (".bashrc",), ".bashrc"),  # a leading dot starts the name, not a suffix
            ("stem", ("a.",), "a."),
            ("stem", ("docs/été.md/",), "été"),
            ("stem", ("",), ""),
            ("from_json", ('{"a": [1, 2.5, null, true]}',), {"a": [1, 2.5, None, True]}),
            ("from_json", (' "x" ',), "x"),
            ("from_json", ("null",), None),
        ],
    )
    def test_example(self, name: str, args: tuple[Any, ...], expected: Any) -> None:
        assert call(name, *args) == expected

    def test_literal_arguments_give_the_same_results(self) -> None:
        assert render("lines('a\nb\n')") == ["a", "b"]
        assert render("extract('v1.2', 'v(\\d+)')") == "1"
        assert render("basename('a/b/')") == "b"

    def test_the_key_use_case_a_text_listing_as_items(self) -> None:
        listing = "  docs/a.md\r\ndocs/b.md\n\n"
        assert render("lines(trim(inputs.listing))", listing=listing) == ["docs/a.md", "docs/b.md"]
        assert render("lines(trim(inputs.listing))[*].basename(@)", listing=listing) == ["a.md", "b.md"]
        assert render("lines(inputs.t)[?matches(@, '\\.md$')] | [*].stem(@)", t="a.md\nb.txt\nc.md") == ["a", "c"]

    def test_functions_compose_with_builtins(self) -> None:
        assert render("join('/', split('a.b.c', '.'))") == "a/b/c"
        assert render("length(lines(inputs.t))", t="1\n2\n3\n") == 3
        assert render("from_json(inputs.t).files[0]", t='{"files": ["x"]}') == "x"


class TestProperties:
    line = st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=8).filter(lambda s: not s.endswith("\r"))

    @given(st.lists(line, min_size=1).filter(lambda xs: xs[-1] != ""))
    def test_lines_undoes_join(self, xs: list[str]) -> None:
        assert call("lines", "\n".join(xs)) == xs
        assert call("lines", "\r\n".join(xs)) == xs

    @given(st.lists(line, min_size=1))
    def test_lines_of_terminated_lines(self, xs: list[str]) -> None:
        assert call("lines", "".join(x + "\n" for x in xs)) == xs

    @given(st.lists(st.text(alphabet="ab;é", max_size=5), min_size=1), st.sampled_from([",", "::", "\n"]))
    def test_split_undoes_join(self, xs: list[str], sep: str) -> None:
        assert call("split", sep.join(xs), sep) == xs

    @given(st.text(max_size=20))
    def test_trim_is_idempotent_and_like_strip(self, s: str) -> None:
        once = call("trim", s)
        assert once == s.strip() and call("trim", once) == once

    @given(st.lists(st.text(alphabet="ab.é", min_size=1, max_size=4), min_size=1, max_size=4), st.booleans())
    def test_paths(self, parts: list[str], absolute: bool) -> None:
        path = ("/" if absolute else "") + "/".join(parts)
        assert call("basename", path) == parts[-1] == call("basename", path + "/")
        directory = call("dirname", path)
        assert posixpath.normpath(posixpath.join(directory, call("basename", path))) == posixpath.normpath(path)
        assert call("basename", path).startswith(call("stem", path))

    @given(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
            max_leaves=10,
        )
    )
    def test_from_json_reads_what_json_writes(self, value: Any) -> None:
        assert call("from_json", json.dumps(value)) == value


class TestCompileTimeErrors:
    @pytest.mark.parametrize(
        ("expression", "message", "usage"),
        [
            ("lines('a', 'b')", "lines() takes 1 argument, found 2", "lines(s: string) -> array"),
            ("split(inputs.s)", "split() takes 2 arguments, found 1", "split(s: string, sep: string) -> array"),
            ("trim()", "trim() takes 1 argument, found 0", "trim(s: string) -> string"),
            (
                "replace(inputs.s, 'a')",
                "replace() takes 3 arguments, found 2",
                "replace(s: string, old: string, new: string) -> string",
            ),
            ("lines(`3`)", "lines() expects s to be a string, found a number (3)", "lines(s: string) -> array"),
            ("basename(`null`)", "basename() expects p to be a string, found null", "basename(p: string) -> string"),
            (
                'split(inputs.s, `[","]`)',
                "split() expects sep to be a string, found an array",
                "split(s: string, sep: string) -> array",
            ),
            (
                "upper(matches(inputs.s, 'a'))",
                "upper() expects s to be a string, found a boolean",
                "upper(s: string) -> string",
            ),
            ("lower(!(inputs.s))", "lower() expects s to be a string, found a boolean", "lower(s: string) -> string"),
            (
                "matches(inputs.s, `1`)",
                "matches() expects regex to be a string (a regex), found a number (1)",
                "matches(s: string, regex: regex) -> boolean",
            ),
            (
                "extract(inputs.s, '(a')",
                "extract(): invalid regex '(a': missing ), unterminated subpattern at position 0",
                "extract(s: string, regex: regex) -> string|null",
            ),
            (
                "matches(inputs.s, '[z-a]')",
                "matches(): invalid regex '[z-a]': bad character range z-a at position 1",
                "matches(s: string, regex: regex) -> boolean",
            ),
            ("length(`1`)", None, "length(string|array|object)"),  # the built-ins are checked too
        ],
    )
    def test_message(self, expression: str, message: str | None, usage: str) -> None:
        error = compile_error(expression)
        if message is not None:
            assert error.message == f"{message} in ${{{{ {expression} }}}}"
        assert error.suggestion == f"usage: {usage}"

    def test_an_argument_whose_type_is_unknown_is_left_to_the_run(self) -> None:
        compile_value("${{ lines(inputs.s) }}")
        compile_value("${{ lines(extract(inputs.s, 'a')) }}")  # string or null: null fails at run time only
        compile_value("${{ matches(inputs.s, inputs.pattern) }}")

    def test_the_error_is_located_in_the_file(self) -> None:
        text = (
            "version: 1\nservers:\n  fs: {command: [fs]}\nsteps:\n  ls:\n    server: fs\n    tool: list\n"
            "    args:\n      path: \"${{ lines('a', 'b') }}\"\n"
        )
        with pytest.raises(WorkflowError) as info:
            validate(parse_workflow(text, file="wf.yaml"))
        assert str(info.value) == (
            "wf.yaml:9:13: steps.ls.args.path: lines() takes 1 argument, found 2 in ${{ lines('a', 'b') }}\n"
            "  hint: usage: lines(s: string) -> array"
        )


class TestRenderTimeErrors:
    @pytest.mark.parametrize(
        ("expression", "inputs", "message"),
        [
            (
                "lines(inputs.x)",
                {"x": 3},
                "lines() expects s to be a string, found a number (3); usage: lines(s: string) -> array",
            ),
            (
                "basename(inputs.x)",
                {"x": {"name": "a"}},
                "basename() expects p to be a string, found an object; usage: basename(p: string) -> string",
            ),
            (
                "split(inputs.x, inputs.y)",
                {"x": "a", "y": None},
                "split() expects sep to be a string, found null; usage: split(s: string, sep: string) -> array",
            ),
            (
                "split(inputs.x, inputs.y)",
                {"x": "a", "y": ""},
                "split() needs a separator that is not empty; usage: split(s: string, sep: string) -> array",
            ),
            (
                "replace(inputs.x, inputs.y, 'b')",
                {"x": "a", "y": ""},
                "replace() needs an old text that is not empty; "
                "usage: replace(s: string, old: string, new: string) -> string",
            ),
            (
                "from_json(inputs.x)",
                {"x": "{'a': 1}"},
                "from_json() was given text that is not JSON (expecting property name enclosed in double quotes "
                "at line 1, column 2): \"{'a': 1}\"; usage: from_json(s: string) -> any",
            ),
            (
                "from_json(inputs.x)",
                {"x": "NaN"},
                "from_json() cannot read 'NaN': NaN is not JSON; usage: from_json(s: string) -> any",
            ),
            (
                "matches(inputs.x, inputs.y)",
                {"x": "a", "y": "a)"},
                "matches(): invalid regex 'a)': unbalanced parenthesis at position 1; "
                "usage: matches(s: string, regex: regex) -> boolean",
            ),
            (
                "length(inputs.x)",
                {"x": 3},
                "length() expects argument 1 to be a string, an array or an object, found a number (3); "
                "usage: length(string|array|object)",
            ),
            (
                "sum(inputs.x)",
                {"x": [1, "2"]},
                "sum() expects argument 1 to be an array of numbers, found an array; usage: sum(array-number)",
            ),
        ],
    )
    def test_message(self, expression: str, inputs: dict[str, Any], message: str) -> None:
        assert render_error(expression, **inputs) == f"${{{{ {expression} }}}}: {message}"

    def test_the_error_is_located_in_the_file(self) -> None:
        text = (
            "version: 1\nservers:\n  fs: {command: [fs]}\ninputs:\n  listing: {type: number, default: 3}\n"
            "steps:\n  ls:\n    server: fs\n    tool: list\n    for_each: ${{ lines(inputs.listing) }}\n"
        )
        plan = validate(parse_workflow(text, file="wf.yaml"))
        with pytest.raises(TemplateError) as info:
            plan.steps["ls"].render_items(make_context(inputs={"listing": 3}, env={}, steps={}))
        assert str(info.value) == (
            "wf.yaml:10:15: steps.ls.for_each: ${{ lines(inputs.listing) }}: lines() expects s to be a string, "
            "found a number (3); usage: lines(s: string) -> array"
        )


class TestRegexGuard:
    def test_catastrophic_backtracking_is_stopped(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # (x+x+)+y on a run of x's with no y tries every way to split the run: 2^5000 ways for Python's re.
        monkeypatch.setattr(functions, "REGEX_TIMEOUT", 0.01)
        message = render_error("matches(inputs.s, '(x+x+)+y')", s="x" * 5000)
        assert message == (
            "${{ matches(inputs.s, '(x+x+)+y') }}: matches(): the regex '(x+x+)+y' was stopped after 0.01 s on a "
            "text of 5,000 characters; it backtracks too much (nested repeats like (a+)+ can take exponential "
            "time); usage: matches(s: string, regex: regex) -> boolean"
        )

    def test_the_time_limit_applies_to_extract_too(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(functions, "REGEX_TIMEOUT", 0.01)
        message = render_error("extract(inputs.s, inputs.p)", s="x" * 5000, p="(x+x+)+y")
        assert "extract(): the regex '(x+x+)+y' was stopped after 0.01 s on a text of 5,000 characters" in message

    def test_nested_repeats_that_are_harmless_run(self) -> None:
        assert call("extract", "mail: me@docs.example.org.", r"@((\w+\.)+\w+)") == "docs.example.org"
        assert call("matches", "a" * 10_000, "^(a+)+$") is True

    @pytest.mark.parametrize(
        ("pattern", "problem"),
        [
            (
                "(?:a{1000}){1000}",
                "is too large once its counted repeats are written out (1,000,000 parts, at most 100,000)",
            ),
            ("((a{50}){50}){50}", "is too large once its counted repeats are written out"),
            ("a" * 1001, "is 1001 characters long, more than the 1000 allowed"),
            ("(" * 400 + ")" * 400, "nests too deeply"),
        ],
    )
    def test_patterns_too_big_to_compile_are_refused(self, pattern: str, problem: str) -> None:
        # compiling (?:a{1000}){1000} alone takes the regex package half a second; nesting one more level, hours
        error = compile_error(f"matches(inputs.s, '{pattern}')")
        assert f"matches(): the regex {functions._show(pattern)} {problem}" in error.message
        assert problem in render_error("matches(inputs.s, inputs.p)", s="a", p=pattern)

    def test_patterns_within_the_limits_compile(self) -> None:
        assert call("matches", "a" * 300, "^(?:a{10}){30}$") is True
        assert call("matches", "x", "x" * 1000) is False
        assert call("extract", "2024-05-06", r"(\d{4})-\d{2}-\d{2}") == "2024"


LISTING_WORKFLOW = r"""
version: 1
servers:
  s: {command: [fake]}
inputs:
  listing: {type: string, default: "  docs/intro.md\r\ndocs/guide/setup.md\ndocs/notes.txt\n\n"}
steps:
  list:
    server: s
    tool: echo
    args: {text: "${{ inputs.listing }}"}
  copy:
    server: s
    tool: echo
    for_each: ${{ lines(trim(steps.list.text))[?matches(@, '\.md$')] }}
    key: ${{ stem(item) }}
    args: {text: "out/${{ basename(item) }} from ${{ dirname(item) }}"}
  count:
    server: s
    tool: echo
    for_each: ${{ lines(steps.list.text) }}
    args: {text: "${{ lines(index) }}"}
outputs:
  copied: ${{ steps.copy.results[*].text }}
"""


async def test_a_text_listing_drives_a_fan_out(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": echo_tools})
    plan = plan_of(LISTING_WORKFLOW)
    outcome = await run_plan(plan, harness)
    assert outcome.outputs == {"copied": ["out/intro.md from docs", "out/setup.md from docs/guide"]}
    assert sorted(outcome.state.step("copy").items) == ["intro", "setup"]  # the keys, from stem(item)
    sent = [call.params["arguments"]["text"] for call in harness.calls("s")]  # type: ignore[index]
    assert sorted(sent[1:]) == ["out/intro.md from docs", "out/setup.md from docs/guide"]  # count sent nothing
    assert outcome.steps["count"].status == "failed" and outcome.steps["count"].failed == 4
    errors = sorted(item.error or "" for item in outcome.state.step("count").items.values())
    assert errors[0] == (
        "<string>:22:18: steps.count.args.text: ${{ lines(index) }}: lines() expects s to be a string, "
        "found a number (0); usage: lines(s: string) -> array"
    )


FORMAT_DOC = Path(__file__).parent.parent / "docs" / "format.md"


def test_the_readme_examples_hold() -> None:
    """Every ``expression`` → ``result`` in the Functions section of docs/format.md renders as written."""
    section = FORMAT_DOC.read_text(encoding="utf-8").split("## Functions", 1)[1]
    section = re.split(r"\n##+ ", section, maxsplit=1)[0]
    examples = re.findall(r"(?:``(.+?)``|`([^`]+)`) → `([^`]+)`", section)
    documented = set(re.findall(r"^\| `(\w+)\(", section, flags=re.MULTILINE))
    documented |= set(re.findall(r"^\| `\w+\(s\)`, `(\w+)\(", section, flags=re.MULTILINE))
    assert len(examples) >= 15
    for double, single, result in examples:
        expression = double or single
        assert render(expression) == json.loads(result), expression
    ours = {name for name in functions.FUNCTIONS.FUNCTION_TABLE if f"_func_{name}" in vars(functions.TextFunctions)}
    assert documented == ours


def test_a_subclass_adds_functions_with_the_same_checks() -> None:
    class Extra(functions.TemplateFunctions):
        @functions.function("n: number", returns="number")
        def _func_double(self, n: float) -> float:
            return n * 2

    options = jmespath.Options(custom_functions=Extra())
    assert jmespath.search("double(`2`)", {}, options=options) == 4
    assert jmespath.search("lines('a')", {}, options=options) == ["a"]  # ours are inherited
    with pytest.raises(functions.FunctionError) as info:
        jmespath.search("double('x')", {}, options=options)
    assert (
        str(info.value) == "double() expects n to be a number, found a string ('x'); usage: double(n: number) -> number"
    )
    with pytest.raises(functions.FunctionError, match=r"double\(\) takes 1 argument, found 0; usage: double\(n"):
        jmespath.search("double()", {}, options=options)
