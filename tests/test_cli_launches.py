"""What `validate` and `plan` say about where stdio servers start (runner.cli.launches)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from runner.cli.launches import check_launches, launch_lines
from runner.workflow.loader import validate
from runner.workflow.plantext import render_plan_text

WORKFLOW = """\
version: 1
servers:
  local: {command: [./bin/server.sh, --port, "0"], env_passthrough: [MCP_RUN_T_SET, "MCP_RUN_T_NPM_*", MCP_RUN_T_NO]}
  lost: {command: [./bin/nope.sh]}
  moved: {command: [tool], cwd: nodir}
  on_path: {command: [tool, x], cwd: bin, env_passthrough: ["MCP_RUN_T_NONE_*"]}
  elsewhere: {command: [nosuch-mcp-server]}
  beside: {command: [mcp-run-demo]}
  web: {url: "https://example.com/mcp"}
steps:
  a: {server: local, tool: t}
"""


@pytest.fixture
def flows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "flows"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "server.sh").write_text("#!/bin/sh\n")
    (folder / "bin" / "server.sh").chmod(0o755)
    (folder / "w.yaml").write_text(WORKFLOW)
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "path" / "tool").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))  # the venv is not on PATH
    monkeypatch.setenv("MCP_RUN_T_SET", "v")
    monkeypatch.setenv("MCP_RUN_T_NPM_B", "v")
    monkeypatch.setenv("MCP_RUN_T_NPM_A", "v")
    monkeypatch.chdir(tmp_path)
    return folder


def test_relative_paths_that_do_not_work_are_errors_the_rest_warnings(flows: Path) -> None:
    _servers, errors, warnings = check_launches(validate("flows/w.yaml"))
    assert [str(e) for e in errors] == [
        f"flows/w.yaml:4:20: servers.lost.command[0]: command ./bin/nope.sh not found: {flows}/bin/nope.sh\n"
        f"  hint: a program path with a / is relative to the workflow's folder, {flows}",
        f"flows/w.yaml:5:33: servers.moved.cwd: working directory {flows}/nodir does not exist\n"
        f"  hint: cwd is relative to the workflow's folder, {flows}",
    ]
    venv = os.path.dirname(sys.executable)
    assert [str(w) for w in warnings] == [
        f"flows/w.yaml:7:25: servers.elsewhere.command[0]: command nosuch-mcp-server not found on PATH nor in "
        f"{venv} (beside mcp-run's Python)\n"
        "  hint: this depends on the machine: a run here cannot start server elsewhere"
    ]


def test_plan_shows_where_each_stdio_server_starts(flows: Path) -> None:
    plan = validate("flows/w.yaml")
    servers, _errors, _warnings = check_launches(plan)
    lines = launch_lines(servers)
    tool = flows.parent / "path" / "tool"
    venv = os.path.dirname(sys.executable)
    assert lines["local"] == [
        f"runs {flows}/bin/server.sh --port 0 (relative to the workflow's folder)",
        f"in {flows}",
        "passes through MCP_RUN_T_SET, MCP_RUN_T_NPM_* (MCP_RUN_T_NPM_A, MCP_RUN_T_NPM_B), MCP_RUN_T_NO (not set)",
    ]
    assert lines["on_path"] == [
        f"runs {tool} x (found on PATH)",
        f"in {flows}/bin",
        "passes through MCP_RUN_T_NONE_* (none set)",
    ]
    assert lines["beside"] == [f"runs {venv}/mcp-run-demo (found beside mcp-run's Python, not on PATH)", f"in {flows}"]
    assert lines["lost"] == [f"cannot start here: command ./bin/nope.sh not found: {flows}/bin/nope.sh"]
    assert "web" not in lines
    text = render_plan_text(plan, lines)
    assert f"  local: stdio ./bin/server.sh --port 0 (max_concurrency 8)\n      runs {flows}/bin/server.sh" in text
    assert "runs " not in render_plan_text(plan)  # the pure plan text knows nothing of the machine


def test_a_path_set_in_env_is_the_one_searched(flows: Path, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "nosuch-mcp-server").write_text("#!/bin/sh\n")
    (tmp_path / "other" / "nosuch-mcp-server").chmod(0o755)
    text = (flows / "w.yaml").read_text()
    (flows / "w.yaml").write_text(
        text.replace("elsewhere: {command: [nosuch-mcp-server]}",
                     'elsewhere: {command: [nosuch-mcp-server], env: {PATH: "${{ inputs.path }}"}}')
        + f"inputs:\n  path: {{default: {tmp_path / 'other'}}}\n"
    )  # fmt: skip
    servers, _errors, warnings = check_launches(validate("flows/w.yaml"))
    assert warnings == []
    launch = servers["elsewhere"].launch
    assert launch is not None and launch.argv == (str(tmp_path / "other" / "nosuch-mcp-server"),)
