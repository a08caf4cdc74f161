"""Interruption: the first signal drains (calls in flight finish and are journaled, nothing new starts),
the second cancels calls in flight (journaled as cancelled, in doubt on resume)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import environment, journal_events, run_cli, wait_for_dispatches, write_slow_workflow
from tests.support import sigint_default

pytestmark = pytest.mark.integration


def start(tmp: Path, workflow: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner", str(workflow), "--state-dir", str(tmp / "state"), "--json", *extra],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp,
        preexec_fn=sigint_default,  # interrupted by the tests
    )


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


@pytest.mark.slow
def test_first_sigint_drains_and_the_run_resumes(tmp_path: Path) -> None:
    workflow = write_slow_workflow(tmp_path)
    proc = start(tmp_path, workflow, "--grace", "30")
    wait_for_dispatches(tmp_path, 2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "mcp-run resume" in err
    events = journal_events(tmp_path)
    assert types(events).count("item_dispatched") == 2
    assert types(events).count("item_succeeded") == 2  # the calls in flight finished
    assert events[-1]["type"] == "run_interrupted"
    assert json.loads(out)["status"] == "interrupted"

    resumed = run_cli(
        tmp_path, str(workflow), "--state-dir", str(tmp_path / "state"), "--resume", "--json", timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["steps"]["each"]["succeeded"] == 6 and summary["steps"]["each"]["reused"] == 2
    assert types(journal_events(tmp_path)).count("item_dispatched") == 6


def test_second_signal_cancels_calls_in_flight(tmp_path: Path) -> None:
    workflow = write_slow_workflow(tmp_path)
    proc = start(tmp_path, workflow, "--grace", "30")
    wait_for_dispatches(tmp_path, 2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)  # let the first signal be handled before the second arrives (two separate signals)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err  # the first signal names the exit code
    events = journal_events(tmp_path)
    cancelled = [e for e in events if e["type"] == "item_failed" and e["kind"] == "cancelled"]
    assert len(cancelled) == 2
    resumed = run_cli(tmp_path, str(workflow), "--state-dir", str(tmp_path / "state"), "--resume", "--json", timeout=60)
    assert resumed.returncode == 5  # cancelled calls may have run: in doubt
    assert len(json.loads(resumed.stdout)["in_doubt"]) == 2


def test_sigterm_exit_code(tmp_path: Path) -> None:
    workflow = write_slow_workflow(tmp_path)
    proc = start(tmp_path, workflow, "--grace", "0.5")
    wait_for_dispatches(tmp_path, 2)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
