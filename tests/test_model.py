"""Models, durations, positions, error aggregation and input resolution."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runner.errors import WorkflowError
from runner.workflow.durations import format_duration, parse_duration
from runner.workflow.inputs import resolve_inputs
from runner.workflow.model import Input, Step, Workflow
from runner.workflow.positions import Positions, WorkflowErrors, describe, format_path, raise_errors, suggest_identifier


class TestDurations:
    @pytest.mark.parametrize(
        ("value", "seconds"),
        [(90, 90.0), (0.5, 0.5), ("90s", 90.0), ("10m", 600.0), ("1h", 3600.0), ("500ms", 0.5),
         ("1h30m", 5400.0), ("1.5s", 1.5), (" 2m ", 120.0), ("1m30s250ms", 90.25)],
    )  # fmt: skip
    def test_accepted(self, value: object, seconds: float) -> None:
        assert parse_duration(value) == seconds

    @pytest.mark.parametrize("value", ["90", "10 minutes", "", "s", "1s1h", "1m1m", "-5s", "0s", 0, -1, True, None,
                                       float("nan"), float("inf"), [1]])  # fmt: skip
    def test_refused(self, value: object) -> None:
        with pytest.raises(ValueError):
            parse_duration(value)

    def test_unitless_string_gets_a_hint(self) -> None:
        with pytest.raises(ValueError, match="a unit is required"):
            parse_duration("90")

    @pytest.mark.parametrize(
        ("seconds", "text"), [(0.5, "500ms"), (90, "1m30s"), (30, "30s"), (1.5, "1.5s"), (3600, "1h"), (5400, "1h30m")]
    )
    def test_format(self, seconds: float, text: str) -> None:
        assert format_duration(seconds) == text
        assert parse_duration(text) == seconds


class TestModels:
    def test_step_defaults_and_alias(self) -> None:
        step = Step.model_validate({"server": "s", "tool": "t", "if": "${{ inputs.x }}", "timeout": "1m"})
        assert step.if_ == "${{ inputs.x }}" and step.timeout == 60.0
        assert step.args == {} and step.needs == [] and not step.idempotent and not step.continue_on_error
        assert not step.fan_out and Step.model_validate({"server": "s", "tool": "t", "for_each": []}).fan_out

    @pytest.mark.parametrize(
        "change",
        [{"concurrency": 0}, {"concurrency": "4"}, {"idempotent": "yes"}, {"needs": "a"}, {"args": []},
         {"if": 3}, {"for_each": {"a": 1}}, {"tol": "x"}, {"timeout": "soon"}],
    )  # fmt: skip
    def test_step_refuses(self, change: dict[str, Any]) -> None:
        with pytest.raises(ValidationError):
            Step.model_validate({"server": "s", "tool": "t", **change})

    def test_input_required_follows_default(self) -> None:
        assert Input().is_required
        assert not Input.model_validate({"default": None}).is_required
        assert Input.model_validate({"default": 1, "type": "integer", "required": True}).is_required
        assert not Input.model_validate({"required": False}).is_required

    def test_input_default_must_match_type(self) -> None:
        with pytest.raises(ValidationError, match="default does not match type integer: found a string"):
            Input.model_validate({"type": "integer", "default": "3"})

    def test_workflow_version(self) -> None:
        assert Workflow.model_validate({"version": 1, "steps": {}}).servers == {}
        with pytest.raises(ValidationError, match="unsupported version 2"):
            Workflow.model_validate({"version": 2, "steps": {}})
        with pytest.raises(ValidationError):
            Workflow.model_validate({"version": True, "steps": {}})


class TestPositionsAndErrors:
    def test_format_path(self) -> None:
        assert format_path(("steps", "a", "needs", 1, "x")) == "steps.a.needs[1].x"
        assert format_path(()) == ""

    def test_locate_falls_back_to_the_nearest_ancestor(self) -> None:
        positions = Positions("w.yaml", keys={("steps",): (3, 1)}, values={("steps",): (4, 3), ("steps", "a"): (5, 5)})
        assert positions.locate(("steps", "a", "args", "x")) == (5, 5)
        assert positions.locate(("steps",), at="key") == (3, 1)
        assert positions.locate(("other",)) == (None, None)
        error = positions.error("bad", ("steps", "a", "tool"), suggestion="fix it")
        assert str(error) == "w.yaml:5:5: steps.a.tool: bad\n  hint: fix it"

    def test_raise_errors(self) -> None:
        raise_errors([])
        one = WorkflowError("one", file="f", line=2, column=1)
        with pytest.raises(WorkflowError) as info:
            raise_errors([one, one])
        assert info.value is one
        two = WorkflowError("two", file="f", line=1, column=1, suggestion="hint")
        with pytest.raises(WorkflowErrors) as many:
            raise_errors([one, two])
        assert many.value.errors == [two, one]
        assert str(many.value) == "f:1:1: two\n  hint: hint\nf:2:1: one"
        assert many.value.line == 1

    def test_suggest_identifier(self) -> None:
        assert suggest_identifier("convert-files") == "convert_files"
        assert suggest_identifier("1st step") == "_1st_step"
        assert suggest_identifier("") == "_"

    def test_describe(self) -> None:
        values: list[Any] = [None, True, 3, 1.5, "x", [], {}]
        assert [describe(v) for v in values] == [
            "null", "a boolean (true)", "an integer (3)", "a number (1.5)", "a string ('x')", "a list", "a mapping"
        ]  # fmt: skip


DECLARED = {
    "name": Input(),
    "count": Input.model_validate({"type": "integer", "default": 1}),
    "ratio": Input.model_validate({"type": "number", "default": 0.5}),
    "flag": Input.model_validate({"type": "boolean", "default": False}),
    "files": Input.model_validate({"type": "array", "default": []}),
    "opts": Input.model_validate({"type": "object", "required": False}),
    "token": Input.model_validate({"secret": True, "required": False}),
}


class TestResolveInputs:
    def test_defaults_and_coercion(self) -> None:
        values = resolve_inputs(
            DECLARED,
            ["name=docs", "count=7", "ratio=2", "flag=yes", 'files=["a", "b"]', 'opts={"k": 1}'],
        )
        assert values == {
            "name": "docs", "count": 7, "ratio": 2, "flag": True, "files": ["a", "b"], "opts": {"k": 1}, "token": None
        }  # fmt: skip

    @pytest.mark.parametrize(("text", "value"), [("true", True), ("No", False), ("1", True), ("0", False)])
    def test_booleans(self, text: str, value: bool) -> None:
        assert resolve_inputs(DECLARED, ["name=x", f"flag={text}"])["flag"] is value

    def test_pairs_override_the_file_which_overrides_defaults(self) -> None:
        values = resolve_inputs(DECLARED, ["count=3"], {"name": "from-file", "count": 2, "ratio": "1e3"})
        assert (values["name"], values["count"], values["ratio"]) == ("from-file", 3, 1000.0)
        assert resolve_inputs(DECLARED, ["name=a=b"])["name"] == "a=b"

    def test_missing_required_names_the_flag(self) -> None:
        positions = Positions("w.yaml", keys={("inputs", "name"): (4, 3)})
        with pytest.raises(WorkflowError) as info:
            resolve_inputs(DECLARED, [], positions=positions)
        assert str(info.value) == (
            "w.yaml:4:3: inputs.name: missing required input 'name'\n"
            "  hint: set it with --input name=VALUE or in an inputs file"
        )
        assert resolve_inputs(DECLARED, [], require=False)["name"] is None

    @pytest.mark.parametrize(
        ("pair", "message"),
        [
            ("count=abc", "inputs.count: input 'count': expected an integer, found a string ('abc')"),
            ("count=1.5", "inputs.count: input 'count': expected an integer, found a string ('1.5')"),
            ("ratio=nan", "inputs.ratio: input 'ratio': expected a number, found a string ('nan')"),
            (
                "flag=maybe",
                "inputs.flag: input 'flag': expected a boolean (true/false/yes/no/1/0), found a string ('maybe')",
            ),
            ("files={}", "inputs.files: input 'files': expected a JSON array, found a string ('{}')"),
            ("opts=[1", "inputs.opts: input 'opts': expected a JSON object, found a string ('[1')"),
            ("nmae=x", "unknown input 'nmae' in --input (inputs: name, count, ratio, flag, files, opts, token)"),
            ("name", "expected --input NAME=VALUE, found 'name'"),
        ],
    )
    def test_bad_values(self, pair: str, message: str) -> None:
        with pytest.raises(WorkflowError) as info:
            resolve_inputs(DECLARED, ["name=x", pair])
        assert info.value.message == message.split(": ", 1)[1] if message.startswith("inputs.") else message
        assert str(info.value).startswith(message)

    def test_unknown_name_suggests(self) -> None:
        with pytest.raises(WorkflowError) as info:
            resolve_inputs(DECLARED, [], {"nmae": "x"})
        assert info.value.suggestion == "did you mean 'name'?"

    def test_a_secret_value_is_never_shown(self) -> None:
        declared = {"pin": Input.model_construct(type="integer", secret=True)}  # as no workflow may declare
        with pytest.raises(WorkflowError) as info:
            resolve_inputs(declared, ["pin=hunter2"])
        assert "hunter2" not in str(info.value)
        assert "hidden" in str(info.value)

    def test_all_problems_together(self) -> None:
        with pytest.raises(WorkflowErrors) as info:
            resolve_inputs(DECLARED, ["count=x", "flag=x"])
        assert len(info.value.errors) == 3  # count, flag, and the missing name


class TestModuleSurface:
    MODULES = (
        "runner.workflow.durations",
        "runner.workflow.model",
        "runner.workflow.positions",
        "runner.workflow.inputs",
        "runner.workflow.expressions",
        "runner.workflow.template",
        "runner.workflow.plan",
        "runner.workflow.loader",
    )

    @pytest.mark.parametrize("name", MODULES)
    def test_all_lists_every_public_definition(self, name: str) -> None:
        module = importlib.import_module(name)
        defined = {
            attr
            for attr, value in vars(module).items()
            if not attr.startswith("_") and getattr(value, "__module__", name) == name and callable(value)
        }
        assert defined <= set(module.__all__)
        assert all(hasattr(module, attr) for attr in module.__all__)

    @pytest.mark.parametrize(
        "name",
        [
            "runner.workflow.durations",
            "runner.workflow.model",
            "runner.workflow.positions",
            "runner.workflow.inputs",
            "runner.workflow.expressions",
            "runner.workflow.template",
            "runner.workflow.plan",
        ],
    )
    def test_the_pure_core_imports_no_io_library(self, name: str) -> None:
        source = Path(importlib.import_module(name).__file__ or "").read_text(encoding="utf-8")
        names = {
            (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        imported = {name if name == "urllib.parse" else name.split(".")[0] for name in names}  # parsing, no I/O
        assert imported <= {"__future__", "collections", "contextlib", "contextvars", "dataclasses", "difflib",
                             "functools", "hashlib", "json", "math", "pathlib", "re", "shlex", "sys", "typing",
                             "urllib.parse", "pydantic", "pydantic_core", "jmespath", "runner"}  # fmt: skip
