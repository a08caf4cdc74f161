"""The checks before the first call (``runner.engine.preflight``): what each refuses, what each leaves alone.

End to end through the CLI: ``tests/e2e/test_refuse_before_calling.py``. Here: the cases a test cannot make
with files alone (a full disk, as a write to ``/dev/full``), and that the checks change nothing they look at.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import jsonschema
import pytest

import runner
from runner.cli import main
from runner.engine.journal.rundir import WorkflowLock
from runner.engine.preflight import PROBE_BYTES, OutputUnusable, StateDirUnusable, check_output, check_state_dir
from runner.schemas import error_schema

WORKFLOW = "version: 1\nservers: {s: {command: [no-such-program]}}\nsteps:\n  a: {server: s, tool: t}\n"


def test_a_full_disk_refuses_the_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's file is ``/dev/full``: its write fails as on a full disk, with ``ENOSPC``."""
    made: list[str] = []
    real_mkstemp = tempfile.mkstemp

    def full(*, dir: str, prefix: str) -> tuple[int, str]:
        fd, path = real_mkstemp(dir=dir, prefix=prefix)
        os.close(fd)
        made.append(path)
        return os.open("/dev/full", os.O_WRONLY), path

    monkeypatch.setattr("runner.engine.preflight.tempfile.mkstemp", full)
    with pytest.raises(StateDirUnusable) as info:
        check_state_dir(tmp_path / "state")
    assert str(info.value) == (
        f"cannot keep runs in {tmp_path / 'state'}: No space left on device; nothing was called. Free some space, "
        "or choose another directory with --state-dir DIR"
    )
    assert len(made) == 1 and not Path(made[0]).exists()  # the probe's file is removed


def test_the_state_dir_is_made_and_left_as_it_was(tmp_path: Path) -> None:
    check_state_dir(tmp_path / "state")
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["locks", "runs"]
    assert PROBE_BYTES >= 4096


def test_a_state_dir_whose_lock_cannot_be_opened_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What passes the checks and still fails while the run is chosen (the lock file here) is the state
    directory's error too, with its exit code and JSON object, never a traceback."""
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WORKFLOW)
    state = tmp_path / "state"
    check_state_dir(state)
    lock = WorkflowLock(state, workflow).paths[0]
    lock.mkdir()  # a directory where the lock file goes: opening it fails
    assert main([str(workflow), "--state-dir", str(state), "--json"]) == 2
    out = capsys.readouterr()
    message = (
        f"cannot keep runs in {state}: {lock}: Is a directory; nothing was called. Choose another directory with "
        "--state-dir DIR"
    )
    assert out.err == f"mcp-run: error: {message}\n"
    report = json.loads(out.out)
    jsonschema.validate(report, error_schema())
    assert (report["exit_code"], report["message"]) == (2, message)


def test_a_state_dir_whose_folder_is_a_file_names_it(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "locks").write_text("")
    with pytest.raises(StateDirUnusable, match=r": .*state/locks: File exists; nothing was called"):
        check_state_dir(tmp_path / "state")


def test_checking_an_output_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text('{"old": 1}\n')
    os.utime(out, (1_000_000_000, 1_000_000_000))
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WORKFLOW)
    check_output(out, workflow=workflow)
    assert out.read_text() == '{"old": 1}\n' and out.stat().st_mtime == 1_000_000_000
    check_output(tmp_path / "new.json", workflow=workflow)
    assert not (tmp_path / "new.json").exists()
    check_output(Path("/dev/null"), workflow=workflow)


def test_an_output_fifo_is_not_opened(tmp_path: Path) -> None:
    """A FIFO nobody reads yet is left for the end (its reader may start later): opening it now would wait."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WORKFLOW)
    check_output(fifo, workflow=workflow)


def test_an_output_bind_mounted_onto_the_workflow_is_the_workflow(tmp_path: Path) -> None:
    """Device and inode, not the path: a file reached through another mount of its file system is the same."""
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WORKFLOW)
    other = tmp_path / "other.yaml"
    other.write_text("")
    if os.geteuid() != 0 or os.system(f"mount --bind {workflow} {other} 2>/dev/null") != 0:
        pytest.skip("needs a bind mount (root)")
    try:
        with pytest.raises(OutputUnusable, match=r"it is the workflow file \(.*wf.yaml\) under another name"):
            check_output(other, workflow=workflow)
    finally:
        os.system(f"umount {other}")


def test_the_python_api_refuses_a_state_dir_that_is_a_file(tmp_path: Path) -> None:
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WORKFLOW)
    with pytest.raises(StateDirUnusable, match="it is a character device, not a directory; nothing was called"):
        runner.run_workflow(workflow, state_dir="/dev/null")
