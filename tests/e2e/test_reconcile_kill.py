"""kill -9 mid-batch of a side-effecting fan-out with ``reconcile:`` (issue 31): ``FILE --resume`` exits 0 with no
decision asked or given, and every key was executed exactly once.

The server is the official SDK's (tests/peers/sdk_server.py): ``count`` appends the item's key to a file, fsynced,
once per execution (the ground truth of what ran, and not safe to repeat); ``counted`` says whether the file holds
a key (read-only: the reconcile tool). Killed with calls in flight, some of them reached the server (their
reconcile says done) and some did not (called on resume).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.support import count_fan_out, counting_peer, environment, journal_events, run_and_kill_at

pytestmark = pytest.mark.integration

ITEMS = 200


RECONCILE = """\
    reconcile:
      tool: counted
      args: {key: "${{ args.key }}"}
      done: ${{ result.json.counted }}
      idempotent: true
"""


def write_workflow(tmp: Path) -> tuple[Path, Path]:
    count_file = tmp / "executions.txt"
    items = [f"item-{i:03d}" for i in range(ITEMS)]
    peer = counting_peer(count_file, max_concurrency=8)
    workflow = count_fan_out(tmp, items, peer=peer, args='{key: "${{ item }}", delay: 0.02}', step_extra=RECONCILE)
    return workflow, count_file


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [40, 250])
def test_a_resume_settles_the_doubt_by_asking_and_runs_each_key_once(tmp_path: Path, kill_at: int) -> None:
    workflow, count_file = write_workflow(tmp_path)
    args = [
        sys.executable, "-m", "runner", str(workflow), "--inputs-file", str(tmp_path / "inputs.json"),
        "--state-dir", str(tmp_path / "state"), "--json", "--quiet",
    ]  # fmt: skip
    run_and_kill_at(tmp_path, args, kill_at)
    before = journal_events(tmp_path)
    last: dict[str, str] = {}
    for e in before:
        if e["type"] in ("item_dispatched", "item_succeeded", "item_failed"):
            last[e["item"]] = e["type"]
    assert any(kind == "item_dispatched" for kind in last.values()), "killed with no call in flight"

    result = subprocess.run(
        [*args, "--resume"], env=environment(), capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["steps"]["each"]["succeeded"] == ITEMS
    events = journal_events(tmp_path)
    assert not [e for e in events if e["type"] == "doubt_decided"]
    verdicts = [e for e in events if e["type"] == "item_reconciled"]
    assert verdicts and {e["verdict"] for e in verdicts} <= {"done", "not-done"}
    executions = Counter(count_file.read_text().split())
    assert set(executions) == {f"item-{i:03d}" for i in range(ITEMS)}
    assert max(executions.values()) == 1, "a key ran twice"
