"""Crash tests: SIGKILL the runner mid-batch at seeded journal sizes, resume, and check that nothing was
lost and nothing ran twice that must not.

The server is the official SDK's (tests/peers/sdk_server.py) with its ``count`` tool, which appends the
item's key to a file, fsynced, once per execution: the file is the ground truth of what ran.

A SIGKILL cannot show a missing fsync (the page cache survives the process); these tests prove the
write-ahead order and the resume logic, not durability against power loss.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import ROOT, count_fan_out, counting_peer, environment, journal_events, run_and_kill_at

pytestmark = pytest.mark.integration

ITEMS = 500


def write_workflow(tmp: Path, *, idempotent: bool) -> tuple[Path, Path]:
    count_file = tmp / "executions.txt"
    items = [f"item-{i:03d}" for i in range(ITEMS)]
    peer = counting_peer(count_file, max_concurrency=8)
    workflow = count_fan_out(tmp, items, peer=peer, step_extra=f"    idempotent: {str(idempotent).lower()}\n")
    return workflow, count_file


def run_args(tmp: Path, workflow: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "runner",
        str(workflow),
        "--inputs-file",
        str(tmp / "inputs.json"),
        "--state-dir",
        str(tmp / "state"),
        "--json",
        "--quiet",
        "--retry-attempts",
        "1",
        *extra,
    ]


def finish(tmp: Path, args: list[str]) -> tuple[int, dict[str, Any]]:
    result = subprocess.run(args, env=environment(), capture_output=True, text=True, timeout=120, cwd=tmp)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


def succeeded_keys(events: list[dict[str, Any]]) -> list[str]:
    return [e["item"] for e in events if e["type"] == "item_succeeded"]


def dispatched_without_result(events: list[dict[str, Any]]) -> set[str]:
    last: dict[str, str] = {}
    for e in events:
        if e["type"] in ("item_dispatched", "item_succeeded", "item_failed"):
            last[e["item"]] = e["type"]
    return {k for k, t in last.items() if t == "item_dispatched"}


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [40, 400, 900])
def test_idempotent_batch_survives_kills(tmp_path: Path, kill_at: int) -> None:
    workflow, count_file = write_workflow(tmp_path, idempotent=True)
    args = run_args(tmp_path, workflow, "--resume")
    run_and_kill_at(tmp_path, args, kill_at)
    run_and_kill_at(tmp_path, args, kill_at + 300)  # a second crash during the resume
    code, summary = finish(tmp_path, args)
    assert code == 0, summary
    assert summary["steps"]["each"]["succeeded"] == ITEMS
    events = journal_events(tmp_path)
    executions = Counter(count_file.read_text().split())
    assert set(executions) == {f"item-{i:03d}" for i in range(ITEMS)}
    # An item journaled as succeeded was never executed again afterwards.
    first_success: dict[str, int] = {}
    for e in events:
        if e["type"] == "item_succeeded":
            first_success.setdefault(e["item"], e["seq"])
    for key, seq in first_success.items():
        later = [e for e in events if e["type"] == "item_dispatched" and e["item"] == key and e["seq"] > seq]
        assert later == [], key
    assert len(journal_events(tmp_path)) == len({e["seq"] for e in events})  # seq never reused


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [60, 500])
def test_non_idempotent_batch_stops_on_items_in_doubt(tmp_path: Path, kill_at: int) -> None:
    workflow, count_file = write_workflow(tmp_path, idempotent=False)
    args = run_args(tmp_path, workflow)
    run_and_kill_at(tmp_path, args, kill_at)
    events = journal_events(tmp_path)
    expected_doubt = dispatched_without_result(events)
    # Killed mid-batch with 8 calls in flight: some were dispatched and got no result recorded.
    assert expected_doubt

    code, summary = finish(tmp_path, [*args, "--resume"])
    assert code == 5, summary
    assert {d["item"] for d in summary["in_doubt"]} == expected_doubt
    code, summary = finish(tmp_path, [*args, "--resume", "--skip-in-doubt"])
    assert code == 1  # skipped items count as failed
    assert summary["steps"]["each"]["failed"] == len(expected_doubt)
    executions = Counter(count_file.read_text().split())
    assert max(executions.values()) == 1, "an item ran twice"
    assert len(executions) >= ITEMS - len(expected_doubt)
    final = journal_events(tmp_path)
    assert final[-1]["type"] == "run_finished"
    assert len(set(succeeded_keys(final))) == len(succeeded_keys(final))


def test_plain_rerun_refuses_while_a_run_is_unfinished(tmp_path: Path) -> None:
    workflow, _ = write_workflow(tmp_path, idempotent=True)
    args = run_args(tmp_path, workflow)
    run_and_kill_at(tmp_path, args, 50)
    result = subprocess.run(args, env=environment(), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2
    assert "--resume" in result.stderr and "unfinished" in result.stderr


def test_a_journal_that_cannot_be_written_stops_the_run_cleanly(tmp_path: Path) -> None:
    """Disk full (here: a file-size limit): the run stops with a clear message and exit 1, never a
    traceback, and nothing is dispatched without its record."""
    import resource

    workflow, count_file = write_workflow(tmp_path, idempotent=False)
    limit = 24 * 1024

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run(
        run_args(tmp_path, workflow),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        preexec_fn=small_files,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "cannot write the journal" in result.stderr and "mcp-run resume" in result.stderr
    events = journal_events(tmp_path)
    dispatched = {e["item"] for e in events if e["type"] == "item_dispatched"}
    executed = set(count_file.read_text().split()) if count_file.exists() else set()
    assert executed <= dispatched  # every execution the server saw had its dispatch record


def test_a_crash_in_the_middle_of_a_notification_flood_resumes_soundly(tmp_path: Path) -> None:
    # Each call sends 20,000 progress notifications and 20,000 log messages before its answer; the journal
    # holds a bounded part of them (runner.engine.journal.notes). Killed while the first flood is journaled.
    count_file = tmp_path / "executions.txt"
    (tmp_path / "inputs.json").write_text(json.dumps({"items": ["a", "b", "c"]}))
    workflow = tmp_path / "flood.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
  peer:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(ROOT / "tests/fakes/mcp_modes.py"))},
              flood, --flood, "20000", --count-file, {json.dumps(str(count_file))}]
    max_concurrency: 1
inputs:
  items: {{type: array}}
steps:
  each: {{server: peer, tool: echo, for_each: "${{{{ inputs.items }}}}", args: {{text: "${{{{ item }}}}"}}}}
"""
    )
    args = run_args(tmp_path, workflow)
    run_and_kill_at(tmp_path, args, 500)  # in the first item's flood: its log messages are being journaled
    cut = journal_events(tmp_path)
    assert "a" in dispatched_without_result(cut) and not succeeded_keys(cut)
    code, summary = finish(tmp_path, [*args, "--resume", "--rerun-in-doubt"])
    assert code == 0, summary
    executions = Counter(count_file.read_text().split())
    assert executions["b"] == executions["c"] == 1 and executions["a"] <= 2  # a: in doubt, called again by decision
    final = journal_events(tmp_path)
    assert sorted(succeeded_keys(final)) == ["a", "b", "c"]
    # 120,000 notifications: ~30 MB one record each. A stdio server's log messages are kept at 100 a second
    # after the first 1,000 (runner.engine.journal.notes), so a loaded machine (a slower flood) keeps more:
    # the bound is 30x under unbounded, not a measure of the machine's speed.
    assert sum(len(json.dumps(e)) for e in final) < 1_000_000
    for item in "bc":
        progress = [e for e in final if e["type"] == "progress" and e["item"] == item]
        assert sum(1 + p.get("folded", 0) for p in progress) == 20_000 and progress[-1]["progress"] == 20_000
    shown = subprocess.run(
        [sys.executable, "-m", "runner", "show", str(workflow), "--state-dir", str(tmp_path / "state")],
        env=environment(), capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "log messages left out of the journal (past the first 1,000" in shown.stdout
