"""Issue 25's scenario through the command line, with kill -9: a skip decision survives a crash, a later
``--rerun-in-doubt`` calls only what is in doubt now, and ``--accept-in-doubt`` records calls as done."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.support import MODES, environment_without_state_dir

pytestmark = pytest.mark.integration


def write(tmp: Path) -> Path:
    path = tmp / "wf.yaml"
    command = json.dumps(
        [sys.executable, str(MODES), "count", "--count-file", str(tmp / "count.txt"), "--gate", str(tmp / "gate")]
    )
    path.write_text(
        f"""version: 1
servers:
  peer:
    command: {command}
    max_concurrency: 2
steps:
  each:
    server: peer
    tool: count
    for_each: ["k1", "k2", "k3", "k4"]
    key: "${{{{ item }}}}"
    args: {{key: "${{{{ item }}}}"}}
  after:
    server: peer
    tool: count
    needs: [each]
    args: {{key: after}}
"""
    )
    return path


def mcp_run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        env=environment_without_state_dir(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp,
        stdin=subprocess.DEVNULL,
    )


def journal(tmp: Path) -> list[dict[str, object]]:
    paths = list((tmp / ".mcp-run" / "runs").glob("*/journal.jsonl")) if (tmp / ".mcp-run").exists() else []
    if not paths:
        return []
    [path] = paths
    data = path.read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def dispatches(tmp: Path) -> Counter[object]:
    return Counter(e["item"] or e["step"] for e in journal(tmp) if e["type"] == "item_dispatched")


def crash_with_calls_in_flight(tmp: Path, *args: str, dispatched: int) -> None:
    """Run ``mcp-run ARGS``; SIGKILL it once the journal holds ``dispatched`` dispatches (held by the gate)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", *args],
        env=environment_without_state_dir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp,
    )
    deadline = time.monotonic() + 60
    try:
        while sum(dispatches(tmp).values()) < dispatched:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)  # polling a file another process writes; bounded
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def run_id(tmp: Path) -> str:
    [path] = (tmp / ".mcp-run" / "runs").iterdir()
    return path.name


def test_skip_then_crash_then_rerun_calls_each_item_once_after_its_decision(tmp_path: Path) -> None:
    write(tmp_path)
    crash_with_calls_in_flight(tmp_path, "wf.yaml", dispatched=2)  # k1, k2 in flight
    run = run_id(tmp_path)
    asked = mcp_run(tmp_path, "wf.yaml", "--resume")
    assert asked.returncode == 5 and "each[k1]" in asked.stderr and "--accept-in-doubt" in asked.stderr
    crash_with_calls_in_flight(tmp_path, "resume", "wf.yaml", run, "--skip-in-doubt", dispatched=4)
    asked = mcp_run(tmp_path, "wf.yaml", "--resume")
    assert asked.returncode == 5, asked.stderr
    assert "each[k3]" in asked.stderr and "each[k4]" in asked.stderr and "each[k1]:" not in asked.stderr
    (tmp_path / "gate").touch()
    rerun = mcp_run(tmp_path, "resume", "wf.yaml", run, "--rerun-in-doubt")
    assert rerun.returncode == 1, rerun.stderr  # k1 and k2 stay skipped: they count as failed
    assert dispatches(tmp_path) == {"k1": 1, "k2": 1, "k3": 2, "k4": 2}
    assert sorted((tmp_path / "count.txt").read_text().split()) == ["k3", "k4"]


def test_accept_in_doubt_counts_the_calls_as_done_and_runs_what_follows(tmp_path: Path) -> None:
    write(tmp_path)
    crash_with_calls_in_flight(tmp_path, "wf.yaml", dispatched=2)
    (tmp_path / "gate").touch()
    accepted = mcp_run(tmp_path, "resume", "wf.yaml", run_id(tmp_path), "--accept-in-doubt", "--json")
    assert accepted.returncode == 0, accepted.stderr
    assert dispatches(tmp_path) == {"k1": 1, "k2": 1, "k3": 1, "k4": 1, "after": 1}
    assert json.loads(accepted.stdout)["status"] == "succeeded"
    shown = mcp_run(tmp_path, "show", "wf.yaml")
    assert "recorded as done (2)" in shown.stdout and "each[k1]" in shown.stdout, shown.stdout
    again = mcp_run(tmp_path, "resume", "wf.yaml", "--rerun-in-doubt")
    assert again.returncode == 2, again.stderr  # nothing left open: no decision reaches a settled item
    assert dispatches(tmp_path)["k1"] == 1
