"""Where a stdio server starts (runner.launch): the program, the working directory, the variables passed through."""

from __future__ import annotations

import os
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import ConnectFailed
from runner.exitcodes import ExitCode
from runner.launch import Found, LaunchError, passed_through, resolve_launch


def program(folder: Path, name: str, *, executable: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755 if executable else 0o644)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``flows/`` (a workflow's folder) with ``server.sh``, ``bin/tool`` and ``data/``; ``path1``/``path2`` on a
    PATH; ``venv/bin`` beside an interpreter."""
    program(tmp_path / "flows", "server.sh")
    program(tmp_path / "flows" / "bin", "tool")
    (tmp_path / "flows" / "data").mkdir()
    program(tmp_path / "path2", "node")
    program(tmp_path / "venv" / "bin", "node")
    program(tmp_path / "venv" / "bin", "mcp-run-demo")
    return tmp_path


def launch(tree: Path, command: list[str], cwd: str | None = None) -> tuple[tuple[str, ...], str, Found]:
    path = f"{tree / 'path1'}{os.pathsep}{tree / 'path2'}"
    result = resolve_launch(command, base=str(tree / "flows"), cwd=cwd, path=path, beside=str(tree / "venv" / "bin"))
    return result.argv, result.cwd, result.found


def test_a_relative_program_starts_from_the_workflows_folder_not_the_callers(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree / "path2")  # the caller's directory plays no part
    flows = tree / "flows"
    assert launch(tree, ["./server.sh", "--flag", "./x"]) == (
        (str(flows / "server.sh"), "--flag", "./x"),  # arguments are passed as they are
        str(flows),  # and the server runs in the workflow's folder, so they read from there
        Found.RELATIVE,
    )
    assert launch(tree, ["bin/tool"])[0] == (str(flows / "bin" / "tool"),)
    assert launch(tree, ["../flows/bin/../server.sh"])[0] == (str(flows / "server.sh"),)


def test_a_relative_program_does_not_depend_on_cwd(tree: Path) -> None:
    # cwd moves the server, not the place its program is found: every relative path starts from the workflow.
    argv, cwd, _ = launch(tree, ["./server.sh"], cwd="data")
    assert argv == (str(tree / "flows" / "server.sh"),) and cwd == str(tree / "flows" / "data")


def test_cwd_relative_absolute_and_default(tree: Path) -> None:
    assert launch(tree, ["./server.sh"])[1] == str(tree / "flows")
    assert launch(tree, ["./server.sh"], cwd="data/")[1] == str(tree / "flows" / "data")
    assert launch(tree, ["./server.sh"], cwd="..")[1] == str(tree)
    assert launch(tree, ["./server.sh"], cwd=str(tree / "path2"))[1] == str(tree / "path2")


def test_a_bare_name_is_looked_up_on_path_first_then_beside_the_interpreter(tree: Path) -> None:
    # node is on PATH (path2) and beside the interpreter: PATH wins, so the fallback never changes what works.
    assert launch(tree, ["node", "server.js"]) == ((str(tree / "path2" / "node"), "server.js"), str(tree / "flows"),
                                                   Found.PATH)  # fmt: skip
    # mcp-run-demo is only beside the interpreter (a virtualenv's bin that is not on PATH).
    assert launch(tree, ["mcp-run-demo"])[0::2] == ((str(tree / "venv" / "bin" / "mcp-run-demo"),), Found.BESIDE_PYTHON)


def test_path_lookup_skips_what_cannot_be_executed(tree: Path) -> None:
    program(tree / "path1", "node", executable=False)  # first on PATH, but not executable: execvp goes on too
    (tree / "path1" / "tool").mkdir()
    program(tree / "path2", "tool")
    assert launch(tree, ["node"])[0] == (str(tree / "path2" / "node"),)
    assert launch(tree, ["tool"])[0] == (str(tree / "path2" / "tool"),)


def test_an_absolute_program_is_used_as_it_is(tree: Path) -> None:
    absolute = str(tree / "path2" / "node")
    assert launch(tree, [absolute]) == ((absolute,), str(tree / "flows"), Found.ABSOLUTE)


def test_the_path_given_is_the_one_searched(tree: Path) -> None:
    # The PATH the server gets (its env may set one), not mcp-run's: here mcp-run's PATH has no node.
    found = resolve_launch(["node"], base=str(tree / "flows"), path=str(tree / "path2"), beside=None)
    assert found.argv == (str(tree / "path2" / "node"),)
    with pytest.raises(LaunchError):
        resolve_launch(["node"], base=str(tree / "flows"), path=str(tree / "path1"), beside=None)


@pytest.mark.parametrize(
    ("command", "cwd", "detail", "part", "relative", "missing"),
    [
        (["./nope.sh"], None, "command ./nope.sh not found: {flows}/nope.sh", "command", True, True),
        (["bin"], None, "command bin not found on PATH nor in {venv} (beside mcp-run's Python)", "command", False,
         True),
        (["./data"], None, "command ./data is a directory: {flows}/data", "command", True, False),
        (["{flows}/nope"], None, "command {flows}/nope not found", "command", False, True),
        (["./server.sh/x"], None, "command ./server.sh/x not found: {flows}/server.sh/x", "command", True, True),
        (["./server.sh"], "missing", "working directory {flows}/missing does not exist", "cwd", True, True),
        (["./server.sh"], "server.sh", "working directory {flows}/server.sh is not a directory", "cwd", True, False),
        (["./server.sh"], "{tree}/gone", "working directory {tree}/gone does not exist", "cwd", False, True),
    ],
)  # fmt: skip
def test_what_cannot_start_is_named_with_the_path_it_resolved_to(
    tree: Path, command: list[str], cwd: str | None, detail: str, part: str, relative: bool, missing: bool
) -> None:
    names = {"flows": tree / "flows", "venv": tree / "venv" / "bin", "tree": tree}
    with pytest.raises(LaunchError) as info:
        launch(tree, [c.format(**names) for c in command], cwd.format(**names) if cwd else None)
    error = info.value
    assert error.detail == detail.format(**names)
    assert (error.part, error.relative, error.missing) == (part, relative, missing)
    # A server that cannot start is unreachable (exit 4) and never tried again: it is misconfigured.
    assert isinstance(error, ConnectFailed) and error.exit_code == ExitCode.UNREACHABLE and not error.retryable
    assert str(error) == f"cannot start the server: {error.detail}"
    located = error.located("docs", "flows/w.yaml:4:15")
    assert str(located) == f"cannot start server docs: {error.detail} (flows/w.yaml:4:15)"
    assert (located.part, located.relative, located.missing) == (part, relative, missing)


def test_a_program_that_is_not_executable_says_how_to_fix_it(tree: Path) -> None:
    script = program(tree / "flows", "plain.sh", executable=False)
    with pytest.raises(LaunchError) as info:
        launch(tree, ["./plain.sh"])
    assert (
        info.value.detail == f"command ./plain.sh is not executable: {script} (make it executable: chmod +x {script})"
    )


def test_a_missing_python_gets_a_hint(tree: Path) -> None:
    with pytest.raises(LaunchError, match=r"have no `python`: write python3"):
        launch(tree, ["python", "-m", "x"])


def test_a_cwd_problem_is_reported_before_the_program(tree: Path) -> None:
    with pytest.raises(LaunchError) as info:
        launch(tree, ["./nope.sh"], cwd="missing")
    assert info.value.part == "cwd"


def test_an_empty_program_is_an_error(tree: Path) -> None:
    with pytest.raises(LaunchError, match="empty string"):
        launch(tree, [""])


ENVIRON = {
    "HTTPS_PROXY": "http://proxy:3128",
    "npm_config_cache": "/c",
    "npm_config_registry": "https://r",
    "NPM_CONFIG_X": "upper",
    "GITHUB_TOKEN": "t0k",
    "EMPTY": "",
    "BASH_FUNC_f%%": "() { :; }",
    "SHELLFN": "() { echo; }",
}


def test_passed_through_names_and_patterns() -> None:
    assert passed_through(["HTTPS_PROXY", "npm_config_*", "NOT_SET"], ENVIRON) == {
        "HTTPS_PROXY": "http://proxy:3128",
        "npm_config_cache": "/c",
        "npm_config_registry": "https://r",  # names are case-sensitive: NPM_CONFIG_X is not one of them
    }
    assert passed_through(["EMPTY"], ENVIRON) == {"EMPTY": ""}  # set, though empty
    assert passed_through(["SHELLFN", "*FN"], ENVIRON) == {}  # exported shell functions never pass
    assert passed_through([], ENVIRON) == {}


def test_passed_through_reads_mcp_runs_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_RUN_TEST_PASS", "yes")
    assert passed_through(["MCP_RUN_TEST_PASS", "MCP_RUN_TEST_UNSET_*"]) == {"MCP_RUN_TEST_PASS": "yes"}


_NAMES = st.text(alphabet="ABab_1", min_size=1, max_size=4)


@given(
    environ=st.dictionaries(_NAMES, st.text(alphabet="xy()", max_size=3), max_size=8),
    patterns=st.lists(st.text(alphabet="Ab_1*", min_size=1, max_size=4), max_size=4),
)
def test_passed_through_is_exactly_the_set_variables_some_pattern_matches(
    environ: dict[str, str], patterns: list[str]
) -> None:
    expected = {
        name: value
        for name, value in environ.items()
        if any(fnmatchcase(name, p) for p in patterns) and not value.startswith("()")
    }
    assert passed_through(patterns, environ) == expected


def test_the_docs_and_the_help_name_the_allow_list(capsys: pytest.CaptureFixture[str]) -> None:
    from runner.cli import main
    from runner.transports.stdio import ALLOWED_ENV_VARS

    readme = " ".join((Path(__file__).resolve().parents[1] / "docs" / "servers.md").read_text().split())
    names = [f"`{name}`" for name in ALLOWED_ENV_VARS]
    assert "It gets only " + ", ".join(names[:-1]) + f" and {names[-1]}" in readme
    with pytest.raises(SystemExit):
        main(["tools", "--help"])
    listed = " ".join(capsys.readouterr().out.split()).split("the server gets only ")[1].split(" --")[0]
    assert sorted(listed.replace(",", " ").split()) == sorted(ALLOWED_ENV_VARS)


@pytest.mark.parametrize("program", ["", "  "])
def test_an_empty_program_after_the_separator_is_a_usage_error(
    program: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner.cli import main

    assert main(["tools", "--", program, "arg"]) == ExitCode.USAGE
    assert "the server's program after -- is" in capsys.readouterr().err
