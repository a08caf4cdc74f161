"""A damaged journal is never resumed and never silently replaced: ``mcp-run`` as a subprocess, on a run of 80
calls to the stdlib fake server's ``count`` tool, which appends each execution to a file (the ground truth of
what ran).

- A run that ended carries its counts in its last record (what ``runs`` reads).
- Its first line torn (the run cut back to open): ``--resume``, ``--retry-failed`` and ``resume`` refuse
  (exit 2) naming the file and line and the way out; nothing runs, no new run starts. ``--new-run`` does
  start one, as asked.
- A wrong-typed field in the middle: ``--resume`` refuses naming the line; ``runs`` lists the run as damaged
  and exits 0; ``show`` prints what comes before the line and exits 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.support import MODES, run_cli

pytestmark = pytest.mark.integration

ITEMS = [f"k{i}" for i in range(80)]


def write(tmp: Path) -> tuple[Path, Path]:
    count = tmp / "executions.txt"
    workflow = tmp / "batch.yaml"
    command = json.dumps([sys.executable, str(MODES), "count", "--count-file", str(count)])
    workflow.write_text(
        f"""
version: 1
servers:
  s:
    command: {command}
inputs:
  items: {{type: array, default: {json.dumps(ITEMS)}}}
steps:
  each:
    server: s
    tool: count
    for_each: ${{{{ inputs.items }}}}
    key: ${{{{ item }}}}
    args: {{key: "${{{{ item }}}}"}}
"""
    )
    return workflow, count


def mcp_run(tmp: Path, *args: str) -> tuple[int, str, str]:
    result = run_cli(tmp, *args, "--state-dir", str(tmp / "state"))
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr


def executions(count: Path) -> int:
    return len(count.read_text().split())


def a_run_cut_open(tmp: Path) -> tuple[Path, Path, Path, list[bytes]]:
    """A finished run of 80 items cut back to its first 40 lines (open, as after a crash): (workflow, count
    file, journal, its lines)."""
    workflow, count = write(tmp)
    code, _, err = mcp_run(tmp, str(workflow), "--no-progress")
    assert code == 0, err
    (journal,) = (tmp / "state" / "runs").glob("*/journal.jsonl")
    last = json.loads(journal.read_bytes().splitlines()[-1])
    assert last["type"] == "run_finished"
    assert last["counts"] == {"succeeded": 80, "failed": 0, "in_doubt": 0, "reused": 0, "reconciled": 0}
    lines = journal.read_bytes().splitlines(keepends=True)[:40]
    journal.write_bytes(b"".join(lines))
    return workflow, count, journal, lines


@pytest.mark.slow
def test_a_torn_first_line_is_refused_never_replaced(tmp_path: Path) -> None:
    workflow, count, journal, lines = a_run_cut_open(tmp_path)
    journal.write_bytes(lines[0][:50] + b"\n" + b"".join(lines[1:]))
    run_id = journal.parent.name
    for args in ([str(workflow), "--resume"], [str(workflow), "--retry-failed"], ["resume", str(workflow)]):
        code, _, err = mcp_run(tmp_path, *args, "--no-progress")
        assert code == 2, (args, err)
        assert f"{journal.relative_to(tmp_path)}:1: not JSON" in err, err
        assert f"run {run_id} cannot be read" in err and "mv " in err and "--new-run" in err
    code, _, err = mcp_run(tmp_path, "resume", run_id, "--no-progress")
    assert code == 2 and f"run {run_id} cannot be read" in err, err
    assert executions(count) == 80  # nothing ran again
    assert [p.name for p in (tmp_path / "state" / "runs").iterdir()] == [run_id]  # no new run
    code, _, err = mcp_run(tmp_path, str(workflow), "--new-run", "--no-progress")
    assert code == 0, err  # asked for by name: a new run beside the damaged one
    assert executions(count) == 160


@pytest.mark.slow
def test_a_wrong_typed_field_stops_a_resume_and_shows_as_damaged(tmp_path: Path) -> None:
    workflow, count, journal, lines = a_run_cut_open(tmp_path)
    bad = json.loads(lines[9])
    bad["step"] = [1]
    journal.write_bytes(b"".join([*lines[:9], json.dumps(bad).encode() + b"\n", *lines[10:]]))
    code, _, err = mcp_run(tmp_path, str(workflow), "--resume", "--no-progress")
    assert code == 2, err
    assert f"{journal.relative_to(tmp_path)}:10: not an event: {bad['type']}: step: " in err
    assert "cannot be resumed" in err and "mv " in err
    assert executions(count) == 80
    code, out, _ = mcp_run(tmp_path, "runs", "--json")
    (listed,) = json.loads(out)["runs"]
    assert code == 0 and listed["status"] == "damaged"
    assert (listed["damaged"]["line"], listed["damaged"]["field"]) == (10, "step")
    code, out, err = mcp_run(tmp_path, "show", journal.parent.name)
    assert code == 2 and ":10: not an event" in err
    assert "damaged at" in out and "each" in out  # the steps read before the bad line
