"""Tasks against a real peer: server-everything's ``simulate-research-query`` (``execution.taskSupport:
required``) over stdio, run to completion through a workflow by the CLI. Its task reports four stages as
status messages, a second apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import environment, journal_events
from tests.integration.peers import everything_command, missing_peer

pytestmark = pytest.mark.integration


def test_simulate_research_query_runs_as_a_task_to_completion(tmp_path: Path) -> None:
    command = everything_command("stdio")
    if command is None:
        missing_peer("server-everything is not installed: run scripts/setup.sh")
        return
    workflow = tmp_path / "research.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
  everything:
    command: {json.dumps(command)}
steps:
  research:
    server: everything
    tool: simulate-research-query
    args: {{topic: durable tool calls}}
    timeout: 60
outputs:
  report: ${{{{ steps.research.text }}}}
"""
    )
    result = subprocess.run(
        [sys.executable, "-m", "runner", str(workflow), "--state-dir", str(tmp_path / "state"), "--json"],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert summary["outputs"]["report"].startswith("# Research Report: durable tool calls")
    events = journal_events(tmp_path)
    (created,) = [e for e in events if e["type"] == "task_created"]
    assert created["server"] == "everything" and created["ttl"] == 300000 and created["poll_interval"] == 1000
    statuses = [(e["status"], e.get("message")) for e in events if e["type"] == "task_status"]
    assert ("working", "Gathering sources...") in statuses and statuses[-1][0] == "completed"
    assert f"research: task {created['task_id']} working: Analyzing content..." in result.stderr
    logs = subprocess.run(
        [sys.executable, "-m", "runner", "logs", str(workflow), "--state-dir", str(tmp_path / "state")],
        env=environment(), capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert logs.returncode == 0, logs.stderr
    shown = [line.split(" ", 1)[1] for line in logs.stdout.splitlines() if ": task " in line]
    assert shown[0] == f"research: task {created['task_id']} created"
    assert f"research: task {created['task_id']} working: Analyzing content..." in shown
    assert shown[-1].startswith(f"research: task {created['task_id']} completed")


def test_call_of_the_task_only_tool_runs_it_as_a_task(tmp_path: Path) -> None:
    """``mcp-run call`` makes the call a workflow step would: as a task (the tool requires one), its status
    changes on stderr in the views' words, the report on stdout."""
    command = everything_command("stdio")
    if command is None:
        missing_peer("server-everything is not installed: run scripts/setup.sh")
        return
    result = subprocess.run(
        [sys.executable, "-m", "runner", "call", "--tool", "simulate-research-query", "--args",
         '{"topic": "durable tool calls"}', "--timeout", "60", "--", *command],
        env=environment(), capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("# Research Report: durable tool calls")
    statuses = [line.split(" ", 2) for line in result.stderr.splitlines() if line.startswith("task ")]
    assert [status for _task, _id, status in statuses][-1].startswith("completed")
    # Polling samples the task's status: which of its stages are seen depends on the machine's pace.
    assert any(status.startswith("working: ") for _task, _id, status in statuses)
    assert len({task_id for _task, task_id, _status in statuses}) == 1  # one task, named on every line


def test_call_with_arguments_its_schema_refuses_sends_nothing(tmp_path: Path) -> None:
    command = everything_command("stdio")
    if command is None:
        missing_peer("server-everything is not installed: run scripts/setup.sh")
        return
    result = subprocess.run(
        [sys.executable, "-m", "runner", "call", "--tool", "simulate-research-query", "--args", '{"topic": 3}',
         "--", *command],
        env=environment(), capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    refused = "args.topic: 3 is not of type 'string' (refused by the inputSchema of simulate-research-query; not sent)"
    assert refused in result.stderr
