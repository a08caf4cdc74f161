"""Servers start the same from anywhere: a workflow's relative server paths resolve from its folder, the
server runs there, it gets the allow-list plus what ``env_passthrough`` and ``env`` name, and the example
workflows run with the virtualenv's ``bin`` off PATH. Real subprocesses (mcp-run, and a stdlib fake server
that reports its working directory and environment: ``tests/fakes/stdio_environ.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.transports.stdio import ALLOWED_ENV_VARS
from tests.e2e.support import BIN, ROOT, WORKFLOWS, environment

pytestmark = pytest.mark.integration

ENVIRON_SERVER = ROOT / "tests" / "fakes" / "stdio_environ.py"

WORKFLOW = """\
version: 1
servers:
  here:
    command: [./bin/environ.py]
    env_passthrough: [MCP_RUN_T_TOKEN, "MCP_RUN_T_NPM_*", MCP_RUN_T_UNSET]
    env: {MCP_RUN_T_NPM_B: overridden, PLAIN: plain}
steps:
  look: {server: here, tool: environ}
outputs:
  report: ${{ steps.look.structured }}
"""

PASSED = {"MCP_RUN_T_TOKEN": "tok-e2e-5a4b3c2d", "MCP_RUN_T_NPM_A": "alpha-value", "MCP_RUN_T_NPM_B": "beta-value"}
NOT_PASSED = {"MCP_RUN_T_OTHER": "other-value-9z"}


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    """``<tmp>/flows/w.yaml`` whose server is ``./bin/environ.py`` (the fake, with this Python in its #! line);
    tests run mcp-run from ``<tmp>/elsewhere``."""
    folder = tmp_path / "flows"
    (folder / "bin").mkdir(parents=True)
    server = folder / "bin" / "environ.py"
    server.write_text(f"#!{sys.executable}\n" + ENVIRON_SERVER.read_text())
    server.chmod(0o755)
    (folder / "w.yaml").write_text(WORKFLOW)
    (tmp_path / "elsewhere").mkdir()
    return folder


def mcp_run_in(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mcp-run ARGS`` as a subprocess in ``cwd``, with ``env`` over the test's environment."""
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        env={**environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def test_a_relative_server_starts_in_its_workflows_folder_when_run_from_elsewhere(flows: Path) -> None:
    state = flows.parent / "state"
    result = mcp_run_in(flows.parent / "elsewhere", "../flows/w.yaml", "--state-dir", str(state), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["outputs"]["report"]
    assert report["cwd"] == str(flows)
    assert report["argv0"] == str(flows / "bin" / "environ.py")


def test_a_server_sees_the_allow_list_what_it_passes_through_and_its_env_only(flows: Path) -> None:
    state = flows.parent / "state"
    result = mcp_run_in(flows.parent / "elsewhere", "../flows/w.yaml", "--state-dir", str(state), "--json",
                        env={**PASSED, **NOT_PASSED})  # fmt: skip
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)["outputs"]["report"]["env"]
    runner_env = {**environment(), **PASSED, **NOT_PASSED}
    allowed = {name for name in ALLOWED_ENV_VARS if name in runner_env}
    assert set(seen) == allowed | {"MCP_RUN_T_TOKEN", "MCP_RUN_T_NPM_A", "MCP_RUN_T_NPM_B", "PLAIN"}
    assert seen["PLAIN"] == "plain" and seen["MCP_RUN_T_NPM_B"] == "overridden"  # env wins over passthrough
    assert seen["PATH"] == runner_env["PATH"]
    # What is passed through reached the server, and is masked like env values wherever mcp-run writes it.
    assert seen["MCP_RUN_T_TOKEN"] == "***env.MCP_RUN_T_TOKEN***"
    assert seen["MCP_RUN_T_NPM_A"] == "***env.MCP_RUN_T_NPM_A***"
    written = result.stdout + result.stderr + "".join(p.read_text() for p in state.rglob("*.jsonl"))
    assert all(value not in written for value in PASSED.values())
    assert '"PLAIN":"plain"' in next(state.rglob("journal.jsonl")).read_text()  # the result is journaled


def test_a_server_that_cannot_start_names_the_path_and_the_line(flows: Path) -> None:
    (flows / "w.yaml").write_text(WORKFLOW.replace("./bin/environ.py", "./bin/nope.py"))
    elsewhere = flows.parent / "elsewhere"
    checked = mcp_run_in(elsewhere, "validate", "../flows/w.yaml")
    assert checked.returncode == 2
    assert checked.stderr == (
        f"mcp-run: error: ../flows/w.yaml:4:15: servers.here.command[0]: command ./bin/nope.py not found: "
        f"{flows}/bin/nope.py\n  hint: a program path with a / is relative to the workflow's folder, {flows}\n"
    )
    ran = mcp_run_in(elsewhere, "../flows/w.yaml", "--state-dir", str(flows.parent / "state"))
    assert ran.returncode == 4  # unreachable, as for any server that cannot start
    assert f"cannot start server here: command ./bin/nope.py not found: {flows}/bin/nope.py (../flows/w.yaml:4:15)" in (
        ran.stderr
    )
    assert "Traceback" not in ran.stderr


def test_validate_warns_about_a_program_not_on_path(flows: Path) -> None:
    (flows / "w.yaml").write_text(WORKFLOW.replace("./bin/environ.py", "mcp-run-no-such-server"))
    result = mcp_run_in(flows, "validate", "w.yaml")
    assert result.returncode == 0
    assert result.stdout == "w.yaml: valid: 1 step in 1 layer, 1 server, 0 fan-outs\n"
    assert result.stderr.startswith(
        "mcp-run: warning: w.yaml:4:15: servers.here.command[0]: command mcp-run-no-such-server not found on PATH"
    )


def test_tools_and_call_resolve_a_relative_command_from_the_current_directory(flows: Path) -> None:
    listed = mcp_run_in(flows, "tools", "--", "./bin/environ.py")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[0] == "environ"
    called = mcp_run_in(flows, "call", "--tool", "environ", "--json", "--cwd", "bin", "--env", "MCP_RUN_T_TOKEN",
                        "--env", "GIVEN=1", "--", "./bin/environ.py", env={**PASSED, **NOT_PASSED})  # fmt: skip
    assert called.returncode == 0, called.stderr
    report = json.loads(called.stdout)["structuredContent"]
    assert report["cwd"] == str(flows / "bin")
    # The server got the variable passed through: echoed back, it is masked as a secret (its whole value).
    assert report["env"]["MCP_RUN_T_TOKEN"] == "***env.MCP_RUN_T_TOKEN***" and report["env"]["GIVEN"] == "1"
    assert PASSED["MCP_RUN_T_TOKEN"] not in called.stdout + called.stderr
    assert "MCP_RUN_T_OTHER" not in report["env"] and "MCP_RUN_T_NPM_A" not in report["env"]
    missing = mcp_run_in(flows.parent, "tools", "--", "./bin/environ.py")
    assert missing.returncode == 4
    assert f"cannot start the server: command ./bin/environ.py not found: {flows.parent}/bin/environ.py" in (
        missing.stderr
    )


def test_the_example_runs_with_the_virtualenv_off_path(tmp_path: Path) -> None:
    # As `.venv/bin/mcp-run workflows/convert_docs.yaml` on a fresh machine, from another directory, with no
    # virtualenv activated: the demo server, a console script, is found beside mcp-run's Python.
    env = {**environment(), "PATH": os.defpath}
    assert not any(Path(d, "mcp-run-demo").exists() for d in os.defpath.split(os.pathsep) if d)
    plan = subprocess.run([str(BIN / "mcp-run"), "plan", str(WORKFLOWS / "convert_docs.yaml")], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert f"runs {BIN / 'mcp-run-demo'} (found beside mcp-run's Python, not on PATH)\n      in {WORKFLOWS}\n" in (
        plan.stdout
    )
    out = tmp_path / "html"
    result = subprocess.run(
        [str(BIN / "mcp-run"), str(WORKFLOWS / "convert_docs.yaml"), "--state-dir", str(tmp_path / "state"),
         "--input", f"out={out}", "--json"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pages = len(list((WORKFLOWS / "docs").glob("*.md")))
    assert json.loads(result.stdout)["outputs"]["pages"] == pages
    assert len(list(out.glob("*.html"))) == pages + 1  # and the index


def test_the_demo_console_script_without_the_demo_extra_says_what_to_install() -> None:
    # mcp missing: the import of the SDK fails as it would in an environment without the extra.
    code = "import sys; sys.modules['mcp'] = None; import runner.demo; sys.exit(runner.demo.main([]))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr == (
        "mcp-run-demo: the demo server needs the demo extra (module 'mcp' is missing); install it with: "
        "pip install 'mcp-batch-run[demo]' (from a checkout: pip install -e '.[demo]')\n"
    )
