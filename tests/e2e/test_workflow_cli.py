"""`validate`, `plan`, `plan --check`, `--output`, and the busy lock, end to end."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import (
    WORKFLOWS,
    environment,
    journal_path,
    mcp_run,
    run_cli,
    wait_for_dispatches,
    write_slow_workflow,
)

pytestmark = pytest.mark.integration


def test_validate_and_plan() -> None:
    result = mcp_run("validate", str(WORKFLOWS / "convert_docs.yaml"))
    assert result.returncode == 0 and "valid: 3 steps in 3 layers" in result.stdout
    result = mcp_run("plan", str(WORKFLOWS / "convert_docs.yaml"))
    assert result.returncode == 0
    assert "fan-out over ${{ steps.list_files.structured.files }}" in result.stdout


def test_plan_check_finds_missing_tools_and_bad_arguments(tmp_path: Path) -> None:
    ok = mcp_run("plan", "--check", str(WORKFLOWS / "convert_docs.yaml"))
    assert ok.returncode == 0, ok.stderr
    assert "ok: 3 steps checked" in ok.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        f"""
version: 1
servers:
  docs: {{command: [{json.dumps(sys.executable)}, -m, runner.demo]}}
steps:
  a: {{server: docs, tool: convert_markdwn, args: {{path: x, out_dir: y}}}}
  b: {{server: docs, tool: echo, args: {{text: 5}}}}
"""
    )
    result = mcp_run("plan", "--check", str(bad))
    assert result.returncode == 2
    assert "no tool 'convert_markdwn'; did you mean 'convert_markdown'?" in result.stderr
    assert "step b: args.text: 5 is not of type 'string'" in result.stderr


def test_plan_check_of_a_server_nobody_listens_for_is_exit_4(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a loopback port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    flow = tmp_path / "flow.yaml"
    flow.write_text(
        f"""
version: 1
servers:
  api: {{url: "http://127.0.0.1:{port}/mcp"}}
steps:
  a: {{server: api, tool: echo, args: {{text: hi}}}}
"""
    )
    result = mcp_run("plan", "--check", str(flow))
    assert result.returncode == 4, result.stderr
    assert result.stderr.startswith(
        f"mcp-run: error: cannot check the plan: server api: could not initialize: POST http://127.0.0.1:{port}/mcp: "
        "could not connect"
    )


def test_output_file(tmp_path: Path) -> None:
    out = tmp_path / "outputs.json"
    result = mcp_run(
        str(WORKFLOWS / "convert_docs.yaml"),
        "--state-dir", str(tmp_path / "state"),
        "--input", f"out={tmp_path / 'html'}",
        "--output", str(out),
        "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["pages"] == 13
    assert result.stderr == ""  # --quiet: nothing but errors


@pytest.mark.slow
def test_a_running_run_is_busy_for_a_second_process(tmp_path: Path) -> None:
    workflow = write_slow_workflow(tmp_path, items=200)  # outlasts the checks below (it is killed at the end)
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", str(workflow), "--state-dir", str(tmp_path / "state"), "--quiet"],
        env=environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    try:
        wait_for_dispatches(tmp_path, 1)
        path = journal_path(tmp_path)
        assert path is not None
        run_id = path.parent.name
        second = run_cli(tmp_path, "resume", run_id, "--state-dir", str(tmp_path / "state"), timeout=60)
        assert second.returncode == 6, second.stderr
        assert f"process {proc.pid}" in second.stderr
        # One run at a time per workflow: busy whatever the flags, naming the holder and how to see it.
        for flags in ([], ["--new-run"], ["--resume"]):
            other = run_cli(tmp_path, str(workflow), "--state-dir", str(tmp_path / "state"), *flags, timeout=60)
            assert other.returncode == 6, other.stderr
            assert f"process {proc.pid} is running workflow" in other.stderr and run_id in other.stderr
            assert "mcp-run runs slow.yaml --state-dir state" in other.stderr
    finally:
        proc.kill()
        proc.wait(timeout=30)
