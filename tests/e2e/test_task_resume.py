"""Crash, then collect: SIGKILL mcp-run while a server's tasks are working, resume, and every result is
collected by its journaled task id: nothing in doubt, each task executed exactly once.

The server is ``tests/fakes/stdio_tasks.py``: its ``work`` tool runs only as a task, finishes a few seconds
after it was created, keeps its tasks in a file (so the server the resume starts still knows them) and
records each execution in a count file, the ground truth of what ran. The workflow does not say the tool is
safe to repeat: without task ids, every call in flight at the kill would be in doubt.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import environment, journal_events, journal_path
from tests.fakes import fake_command

pytestmark = pytest.mark.integration

ITEMS = 12


def write_workflow(tmp: Path, delay: float) -> tuple[Path, Path]:
    count_file = tmp / "executions.txt"
    command = fake_command(
        "stdio_tasks", "--store", str(tmp / "tasks.json"), "--count-file", str(count_file), "--delay", str(delay)
    )
    workflow = tmp / "tasks.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
  worker:
    command: {json.dumps(command)}
    max_concurrency: 4
inputs:
  items: {{type: array, default: {json.dumps([f"k{i:02d}" for i in range(ITEMS)])}}}
steps:
  each:
    server: worker
    tool: work
    for_each: ${{{{ inputs.items }}}}
    key: ${{{{ item }}}}
    args: {{key: "${{{{ item }}}}"}}
"""
    )
    return workflow, count_file


def run_args(tmp: Path, workflow: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "runner", str(workflow), "--state-dir", str(tmp / "state"), "--json", *extra]


def kill_when_tasks_created(tmp: Path, args: list[str], tasks: int) -> None:
    """Start the runner; SIGKILL it once its journal holds ``tasks`` task ids."""
    proc = subprocess.Popen(args, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            path = journal_path(tmp)
            if path is not None and path.read_bytes().count(b'"type":"task_created"') >= tasks:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)  # polling a file another process writes; bounded by the deadline
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def working_at_the_kill(events: list[dict[str, Any]]) -> set[str]:
    """Items whose last record is their task id: in flight when the runner died."""
    last: dict[str, str] = {}
    for e in events:
        if e["type"] in ("item_dispatched", "task_created", "item_succeeded", "item_failed"):
            last[e["item"]] = e["type"]
    return {k for k, t in last.items() if t == "task_created"}


@pytest.mark.slow
def test_a_resume_collects_the_results_of_tasks_working_at_a_crash(tmp_path: Path) -> None:
    workflow, count_file = write_workflow(tmp_path, delay=3.0)
    kill_when_tasks_created(tmp_path, run_args(tmp_path, workflow), 4)
    before = journal_events(tmp_path)
    working = working_at_the_kill(before)
    assert len(working) >= 4, before[-5:]  # killed with tasks working: without their ids they would be in doubt
    assert not any(e["type"] == "item_succeeded" for e in before)

    result = subprocess.run(
        run_args(tmp_path, workflow, "--resume"),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert "Traceback" not in result.stderr, result.stderr
    summary = json.loads(result.stdout)
    assert result.returncode == 0, (summary, result.stderr[-2000:])
    assert summary["in_doubt"] == [] and summary["steps"]["each"]["succeeded"] == ITEMS

    executions = Counter(count_file.read_text().split())
    assert executions == Counter({f"k{i:02d}": 1 for i in range(ITEMS)})  # each task executed exactly once
    after = journal_events(tmp_path)[len(before) :]
    resent = {e["item"] for e in after if e["type"] == "item_dispatched"}
    assert not (resent & working)  # collected, never called again
    collected = {e["item"]: e["result"]["content"][0]["text"] for e in after if e["type"] == "item_succeeded"}
    assert {key: collected[key] for key in working} == {key: f"done {key}" for key in working}
