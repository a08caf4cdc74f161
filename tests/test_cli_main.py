"""The command line's funnel: command typos, and ``--json`` errors on stdout (``schemas/error.schema.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from runner.cli import main
from runner.schemas import error_schema


def test_a_command_typo_is_named_with_the_command_meant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["valdate", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'valdate'; did you mean 'validate'?" in err


def test_a_file_named_like_a_command_is_still_a_workflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "valdate").write_text("version: 1\nsteps: {}\n")
    main(["valdate", "--json"])
    assert "unknown command" not in capsys.readouterr().err


def test_json_errors_are_one_object_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nservers: {s: {command: [x]}}\nsteps:\n  a: {server: s, tool: t, neds: [b], args: {}}\n")
    assert main([str(bad), "--json"]) == 2
    out = capsys.readouterr()
    report = json.loads(out.out)
    jsonschema.validate(report, error_schema())
    assert report["status"] == "error" and report["exit_code"] == 2
    assert report["problems"] == [
        {
            "message": "unknown key 'neds'",
            "file": str(bad),
            "line": 4,
            "column": 27,
            "path": "steps.a.neds",
            "suggestion": "did you mean 'needs'?",
        }
    ]
    assert "unknown key 'neds'" in out.err  # the human message still goes to stderr

    assert main(["run", "--jsn", str(bad), "--json"]) == 2
    usage = json.loads(capsys.readouterr().out)
    assert usage["problems"] == [] and "unrecognized arguments: --jsn" in usage["message"]


def test_without_json_stdout_stays_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.yaml")]) == 2
    assert capsys.readouterr().out == ""


def test_validate_json_reports_ok_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runner.schemas import validate_schema

    good = tmp_path / "good.yaml"
    good.write_text("version: 1\nservers: {s: {command: [x]}}\nsteps:\n  a: {server: s, tool: t, args: {}}\n")
    assert main(["validate", str(good), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    jsonschema.validate(report, validate_schema())
    assert report["ok"] is True and report["errors"] == [] and report["steps"] == 1

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: 1\nservers: {s: {command: [x]}}\nsteps:\n  a:\n    server: s\n    tool: t\n    args: {t: a: b}\n"
    )
    assert main(["validate", str(bad), "--json"]) == 2
    out = capsys.readouterr()
    report = json.loads(out.out)
    jsonschema.validate(report, validate_schema())
    assert report["ok"] is False
    [error] = report["errors"]
    assert (error["file"], error["line"], error["column"]) == (str(bad), 7, 16)
    assert error["message"].startswith("invalid YAML:") and error["path"] is None
    assert "invalid YAML" in out.err  # the human message still goes to stderr


@pytest.mark.parametrize(
    ("argv", "file", "message"),
    [
        (["validate", "--json"], "", "the following arguments are required: WORKFLOW"),
        (["validate", "--json", "flow.yaml", "--bogus"], "flow.yaml", "unrecognized arguments: --bogus"),
        (["validate", "--bogus", "-i", "a=b", "--json", "flow.yaml"], "flow.yaml", "unrecognized arguments: --bogus"),
        (["validate", "flow.yaml", "--json", "--inputs-file"], "flow.yaml", "argument --inputs-file: expected one"),
        (["validate", "--json", "missing.yaml"], "missing.yaml", "cannot read the workflow"),
        (["validate", "--json", "flow.yaml", "--input", "x"], "flow.yaml", "expected --input NAME=VALUE"),
    ],
)
def test_validate_json_reports_every_refusal_in_its_own_shape(
    argv: list[str],
    file: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from runner.schemas import validate_schema

    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.yaml").write_text("version: 1\nservers: {s: {command: [x]}}\nsteps:\n  a: {server: s, tool: t}\n")
    assert main(argv) == 2  # a usage error's, as without --json (docs/exit-codes.md)
    out = capsys.readouterr()
    report = json.loads(out.out)
    jsonschema.validate(report, validate_schema())
    assert (report["ok"], report["file"]) == (False, file)
    [error] = report["errors"]
    assert error["message"].startswith(message) and message in out.err
