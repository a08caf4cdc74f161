"""Run directories (:mod:`runner.engine.journal.rundir`): one per run, locked while it runs, pruned; where runs are
kept, how they are named on the command line, and one run at a time per workflow."""

from __future__ import annotations

import json
import os
import shlex
import threading
from pathlib import Path

import pytest

from runner.cli import main
from runner.cli.where import inputs_args, parse_target, resume_hint, run_hint, runs_hint, show_hint, state_dir_args
from runner.engine.journal.listing import list_runs, prune
from runner.engine.journal.rundir import (
    AmbiguousRun,
    RunDir,
    WorkflowBusy,
    WorkflowLock,
    find_run,
    is_locked,
    new_run_id,
    resolve_state_dir,
    runs_of,
    unfinished_runs,
)
from runner.errors import BusyError, UsageError
from tests.support import journal_line, sample_journal


@pytest.fixture(autouse=True)
def _no_state_dir_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_RUN_STATE_DIR", raising=False)


def workflow_in(folder: Path, name: str = "batch.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("version: 1\n")
    return path


def add_run(state_dir: Path, workflow: Path, run_id: str, *, closed: str | None = None) -> RunDir:
    """A run directory with a journal naming ``workflow``; ``closed`` ends it with that status."""
    path = state_dir / "runs" / run_id
    path.mkdir(parents=True)
    lines = [{"seq": 1, "ts": "2026-01-02T03:04:05.000Z", "type": "run_started", "run_id": run_id,
              "workflow": str(workflow.resolve()), "inputs": {}, "fingerprints": {}, "pid": 1}]  # fmt: skip
    if closed is not None:
        lines.append({"seq": 2, "ts": "2026-01-02T03:04:06.000Z", "type": "run_finished", "status": closed,
                      "exit_code": 0 if closed == "succeeded" else 1, "outputs": {}})  # fmt: skip
    (path / "journal.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return RunDir(path)


# -- the state directory rule ---------------------------------------------------------------------------------


def test_state_dir_flag_then_environment_then_beside_the_workflow_then_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    workflow = workflow_in(tmp_path / "workflows")
    assert resolve_state_dir(None, None) == Path(".mcp-run")
    assert resolve_state_dir(None, Path("workflows/batch.yaml")) == tmp_path / "workflows" / ".mcp-run"
    monkeypatch.setenv("MCP_RUN_STATE_DIR", "/srv/state")
    assert resolve_state_dir(None, workflow) == Path("/srv/state")
    assert resolve_state_dir(None, None) == Path("/srv/state")
    assert resolve_state_dir("mine", workflow) == Path("mine")


def test_printed_commands_name_the_state_dir_only_when_the_rule_would_not_find_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    workflow = workflow_in(tmp_path / "workflows")
    beside = tmp_path / "workflows" / ".mcp-run"
    assert state_dir_args(beside, workflow) == []
    assert state_dir_args(beside, None) == ["--state-dir", "workflows/.mcp-run"]
    assert state_dir_args(tmp_path / ".mcp-run", None) == []
    assert state_dir_args(Path("/elsewhere/state"), workflow) == ["--state-dir", "/elsewhere/state"]
    run_id = "20260102T030405.000000Z-abcdef"
    assert resume_hint(beside, run_id, workflow, "--skip-in-doubt") == (
        f"mcp-run resume workflows/batch.yaml {run_id} --skip-in-doubt"
    )
    assert resume_hint(beside, run_id, "/gone/batch.yaml") == (
        f"mcp-run resume {run_id} --state-dir workflows/.mcp-run"
    )
    assert runs_hint(tmp_path / "s", workflow) == "mcp-run runs workflows/batch.yaml --state-dir s"
    assert run_hint(beside, workflow, "--resume") == "mcp-run workflows/batch.yaml --resume"
    odd = workflow_in(tmp_path, "my runs.yaml")
    assert shlex.split(run_hint(tmp_path / "state", odd))[1:] == ["my runs.yaml", "--state-dir", "state"]
    named_like_a_command = workflow_in(tmp_path, "runs")
    assert run_hint(tmp_path / ".mcp-run", named_like_a_command) == "mcp-run ./runs"
    monkeypatch.setenv("MCP_RUN_STATE_DIR", str(tmp_path / "env-state"))
    assert state_dir_args(tmp_path / "env-state", workflow) == []  # the same shell has the variable


def test_printed_commands_of_a_run_in_no_state_dir_carry_the_flags_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run on Temporal has no state directory (None): no --state-dir, whatever the rule would find; the
    engine's flags and the inputs as given follow the workflow, quoted for the shell."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_RUN_STATE_DIR", str(tmp_path / "elsewhere"))
    odd = workflow_in(tmp_path, "my runs.yaml")
    given = inputs_args(['items=["a b"]', "n=1"], "my inputs.yaml")
    assert given == ["--input", 'items=["a b"]', "--input", "n=1", "--inputs-file", "my inputs.yaml"]
    assert inputs_args([], None) == []
    assert shlex.split(run_hint(None, odd, "--resume", "--engine", "temporal", *given))[1:] == [
        "my runs.yaml", "--resume", "--engine", "temporal", *given
    ]  # fmt: skip
    assert run_hint(None, workflow_in(tmp_path, "-wf.yaml"), "--resume") == "mcp-run ./-wf.yaml --resume"
    assert resume_hint(None, "r1-abc", odd, "--engine", "temporal") == (
        "mcp-run resume 'my runs.yaml' r1-abc --engine temporal"
    )
    assert show_hint(None, "r1-abc", None, "--engine", "temporal", "--follow", command="logs") == (
        "mcp-run logs r1-abc --engine temporal --follow"
    )


def test_workflow_or_run_id_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    workflow_in(tmp_path / "wf")
    assert parse_target("wf/batch.yaml", None) == (Path("wf/batch.yaml"), None)
    assert parse_target("wf/batch.yaml", "3f9a1c") == (Path("wf/batch.yaml"), "3f9a1c")
    assert parse_target("3f9a1c", None) == (None, "3f9a1c")
    with pytest.raises(UsageError, match=r"no workflow file 'missing\.yaml'"):
        parse_target("missing.yaml", None)
    with pytest.raises(UsageError, match="no workflow file"):
        parse_target("3f9a1c", "20260102")  # two arguments: the first must be a workflow


# -- abbreviated run ids --------------------------------------------------------------------------------------


def test_find_run_by_full_id_unique_prefix_or_suffix(tmp_path: Path) -> None:
    workflow = workflow_in(tmp_path)
    other = workflow_in(tmp_path, "other.yaml")
    state = tmp_path / "state"
    a = add_run(state, workflow, "20260102T030405.000000Z-aaa111").run_id
    b = add_run(state, workflow, "20260102T030406.000000Z-bbb222").run_id
    c = add_run(state, other, "20260103T000000.000000Z-ccc111").run_id
    assert find_run(state, a).run_id == a
    assert find_run(state, "20260103").run_id == c  # prefix
    assert find_run(state, "bbb222").run_id == b  # suffix: the random part
    assert find_run(state, "111", workflow=workflow).run_id == a  # among the workflow's runs only
    with pytest.raises(AmbiguousRun) as ambiguous:
        find_run(state, "111")
    assert ambiguous.value.candidates == [a, c]
    assert a in str(ambiguous.value) and c in str(ambiguous.value)
    with pytest.raises(UsageError, match=r"no run 'zzz' in .*known runs: .*ccc111"):
        find_run(state, "zzz")
    with pytest.raises(UsageError, match="no run 'ccc111' of "):
        find_run(state, "ccc111", workflow=workflow)


def test_runs_of_a_workflow_and_which_are_open(tmp_path: Path) -> None:
    workflow = workflow_in(tmp_path)
    state = tmp_path / "state"
    closed = add_run(state, workflow, "20260102T030405.000000Z-aaaaaa", closed="failed")
    open_ = add_run(state, workflow, "20260102T030406.000000Z-bbbbbb")
    add_run(state, workflow_in(tmp_path, "other.yaml"), "20260102T030407.000000Z-cccccc")
    assert [r.run_id for r in runs_of(state, workflow)] == [closed.run_id, open_.run_id]
    assert [r.run_id for r in unfinished_runs(state, workflow)] == [open_.run_id]
    assert (closed.closed_status(), open_.closed_status()) == ("failed", None)


def test_a_run_whose_first_record_cannot_be_read_counts_as_one_of_the_workflow_it_may_be(tmp_path: Path) -> None:
    workflow, other = workflow_in(tmp_path), workflow_in(tmp_path, "other.yaml")
    state = tmp_path / "state"
    ours = add_run(state, workflow, "20260102T030405.000000Z-aaaaaa")
    theirs = add_run(state, other, "20260102T030406.000000Z-bbbbbb")
    unknown = add_run(state, workflow, "20260102T030407.000000Z-cccccc")
    for run in (ours, theirs):  # a wrong-typed field: the line still names its workflow
        run.journal.write_bytes(run.journal.read_bytes().replace(b'"pid": 1', b'"pid": "one"', 1))
    unknown.journal.write_bytes(b"\x00\x00\x00\n" + unknown.journal.read_bytes())  # names none
    empty = add_run(state, workflow, "20260102T030408.000000Z-dddddd")
    empty.journal.write_bytes(b'{"seq": 1, "ts": "2026-')  # died writing its first record: nothing ran
    assert [r.run_id for r in runs_of(state, workflow)] == [ours.run_id, unknown.run_id]
    assert [r.run_id for r in runs_of(state, other)] == [theirs.run_id, unknown.run_id]
    damage = ours.damage()
    assert damage is not None and damage.line == 1 and damage.path == "pid"
    assert empty.head() == (None, None) and unknown.workflow() is None


# -- one run at a time per workflow ---------------------------------------------------------------------------


def test_a_second_workflow_lock_on_the_same_workflow_is_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    workflow = workflow_in(tmp_path / "wf")
    state = tmp_path / "state"
    first = WorkflowLock(state, workflow).acquire()
    first.set_running("20260102T030405.000000Z-aaaaaa")
    with pytest.raises(WorkflowBusy) as busy:  # a holder that runs: busy at once, however long one would wait
        WorkflowLock(state, Path("wf/../wf/batch.yaml")).acquire(wait=600)  # the same file, named differently
    assert isinstance(busy.value, BusyError) and busy.value.exit_code == 6
    assert (busy.value.pid, busy.value.run_id) == (os.getpid(), "20260102T030405.000000Z-aaaaaa")
    with WorkflowLock(state, workflow_in(tmp_path / "wf", "other.yaml")).acquire():
        pass  # another workflow is not held up
    with WorkflowLock(tmp_path / "elsewhere", workflow).acquire():
        pass  # nor the same workflow in another state directory
    first.release()
    second = WorkflowLock(state, workflow).acquire()
    second.release()
    assert oct((state / "locks").stat().st_mode & 0o777) == "0o700"


def test_cli_runs_and_show_take_a_workflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    workflow = workflow_in(tmp_path / "wf")
    state = tmp_path / "wf" / ".mcp-run"  # the default: beside the workflow
    old = add_run(state, workflow, "20260102T030405.000000Z-aaaaaa", closed="failed").run_id
    new = add_run(state, workflow, "20260102T030406.000000Z-bbbbbb").run_id
    add_run(state, workflow_in(tmp_path / "wf", "other.yaml"), "20260102T030407.000000Z-cccccc")

    assert main(["runs", "wf/batch.yaml", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)["runs"]] == [old, new]
    assert main(["show", "wf/batch.yaml", "--json"]) == 0  # the newest run of the workflow
    assert json.loads(capsys.readouterr().out)["run_id"] == new
    assert main(["show", "wf/batch.yaml", "aaaaaa"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run {old}: failed")
    assert f"mcp-run resume wf/batch.yaml {old} --retry-failed" in out  # pasteable from here
    assert main(["show", "wf/batch.yaml"]) == 0
    assert f"resume it with: mcp-run resume wf/batch.yaml {new}" in capsys.readouterr().out
    assert main(["logs", "wf/batch.yaml", new]) == 0
    assert "run started" in capsys.readouterr().out
    assert main(["runs"]) == 0  # ./.mcp-run: nothing here, and a hint where runs are
    assert "mcp-run runs WORKFLOW" in capsys.readouterr().err
    assert main(["show", "wf/other.yaml", "aaaaaa"]) == 2
    assert "no run 'aaaaaa' of wf/other.yaml" in capsys.readouterr().err
    assert main(["show", "wf/none.yaml"]) == 2
    assert "no workflow file 'wf/none.yaml'" in capsys.readouterr().err


def test_a_workflow_lock_waits_for_a_holder_that_is_still_deciding(tmp_path: Path) -> None:
    """A holder that has not chosen to run yet (it may find an unfinished run and refuse) is waited for; it
    never makes the other process busy when it ends without running."""
    workflow = workflow_in(tmp_path)
    deciding = WorkflowLock(tmp_path / "state", workflow).acquire()
    with pytest.raises(WorkflowBusy) as busy:
        WorkflowLock(tmp_path / "state", workflow).acquire()  # no wait: busy
    assert (busy.value.pid, busy.value.run_id) == (os.getpid(), None)
    got: list[WorkflowLock] = []
    waiter = threading.Thread(target=lambda: got.append(WorkflowLock(tmp_path / "state", workflow).acquire(wait=60)))
    waiter.start()
    deciding.release()  # decided not to run
    waiter.join(timeout=60)
    assert len(got) == 1
    got[0].release()


# -- run directories -------------------------------------------------------------------------------


def test_run_ids_sort_by_time() -> None:
    ids = [new_run_id() for _ in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_run_dir_permissions_lock_and_torn_tail(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "state")
    assert oct(run.path.stat().st_mode & 0o777) == "0o700"
    lock = run.lock()
    with pytest.raises(BusyError) as info:
        run.lock()
    assert info.value.pid == os.getpid()
    assert is_locked(run.path) == os.getpid()
    run.journal.write_bytes(sample_journal() + b'{"seq": 99, "ty')
    fd = run.open_for_append()
    os.close(fd)
    assert run.journal.read_bytes() == sample_journal()  # the torn tail was cut
    assert run.read().last_seq == 12
    lock.release()
    assert is_locked(run.path) is None
    summaries = list_runs(tmp_path / "state")
    assert [s.shown_status for s in summaries] == ["interrupted"]


def test_prune_keeps_newest_finished_and_every_unfinished(tmp_path: Path) -> None:
    state = tmp_path / "state"
    runs = []
    for i in range(5):
        run = RunDir.create(state)
        finished = i != 2
        body = journal_line(seq=1, type="run_started", run_id=run.run_id)
        if finished:
            body += journal_line(seq=2, type="run_finished", status="succeeded", exit_code=0)
        run.journal.write_bytes(body)
        runs.append(run.run_id)
    removed = prune(state, keep=2)
    assert removed == [runs[0], runs[1]]
    assert sorted(p.name for p in (state / "runs").iterdir()) == sorted([runs[2], runs[3], runs[4]])
