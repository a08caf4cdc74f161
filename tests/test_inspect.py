"""``mcp-run runs``/``show``/``logs`` on journals of succeeded, failed, interrupted, in-doubt and running runs."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.cli import main
from runner.cli.journaltail import JournalTail, follow
from runner.cli.runrecord import load, run_record, show_record
from runner.cli.runtext import format_event, log_line
from runner.engine.core.events import encode
from runner.engine.journal.rundir import RunDir, RunLock
from tests.snapshots import JOURNALS, SNAPSHOTS, check, events
from tests.support import entry

RUNNING_ID = "20260102T030405.000000Z-runnin"


def run_id_of(name: str) -> str:
    return str(events(name)[0]["run_id"])


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    for name in JOURNALS:
        run = tmp_path / "runs" / run_id_of(name)
        run.mkdir(parents=True)
        shutil.copy(SNAPSHOTS / f"{name}.jsonl", run / "journal.jsonl")
    return tmp_path


@pytest.fixture
def running(state_dir: Path) -> Iterator[RunLock]:
    """A run whose process is alive: its lock is held (by this process, on another open file)."""
    run = state_dir / "runs" / RUNNING_ID
    run.mkdir()
    shutil.copy(SNAPSHOTS / "interrupted.jsonl", run / "journal.jsonl")
    lock = RunDir(run).lock()
    yield lock
    lock.release()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_table_and_json(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "runs", "--state-dir", str(state_dir))
    assert code == 0
    check(out, "runs.txt")
    code, out, _ = cli(capsys, "runs", "--state-dir", str(state_dir), "--json")
    assert code == 0
    data = json.loads(out)
    data["state_dir"] = "STATE_DIR"
    check(json.dumps(data, indent=2) + "\n", "runs.json")
    statuses = {r["run_id"][-6:]: r["status"] for r in data["runs"]}
    assert statuses == {
        "succee": "succeeded",
        "failed": "failed",
        "fanout": "succeeded",
        "interr": "interrupted",
        "in_dou": "in-doubt",
    }


def test_runs_status_running_comes_from_the_lock(
    state_dir: Path, running: RunLock, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = cli(capsys, "runs", "--state-dir", str(state_dir), "--json")
    record = next(r for r in json.loads(out)["runs"] if r["run_id"] == RUNNING_ID)
    assert (record["status"], record["pid"]) == ("running", os.getpid())
    kept = {"reused": 0, "reconciled": 0}
    assert record["items"] == {"succeeded": 1, "failed": 0, "running": 3, "in_doubt": 0, **kept}  # in flight
    _, out, _ = cli(capsys, "runs", "--state-dir", str(state_dir))
    assert f"running (pid {os.getpid()})" in out
    running.release()
    run = load(RunDir(state_dir / "runs" / RUNNING_ID))
    assert run_record(run, now=0.0)["status"] == "interrupted"
    assert run_record(run, now=0.0)["items"] == {"succeeded": 1, "failed": 0, "running": 0, "in_doubt": 3, **kept}


def test_runs_limit_and_state_dir_from_environment(
    state_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_RUN_STATE_DIR", str(state_dir))
    code, out, _ = cli(capsys, "runs", "--limit", "2")
    assert code == 0
    assert len(out.splitlines()) == 3
    monkeypatch.setenv("MCP_RUN_STATE_DIR", str(state_dir / "nowhere"))
    code, out, err = cli(capsys, "runs")
    assert (code, out) == (0, "")
    assert "no runs in" in err


@pytest.mark.parametrize("name", JOURNALS)
def test_show_text_and_json(
    name: str, state_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(state_dir)  # the printed commands name the state directory relative to here: "."
    monkeypatch.delenv("MCP_RUN_STATE_DIR", raising=False)
    run_id = run_id_of(name)
    code, out, _ = cli(capsys, "show", run_id, "--state-dir", str(state_dir))
    assert code == 0
    check(out, f"{name}.show.txt")
    code, out, _ = cli(capsys, "show", run_id, "--state-dir", str(state_dir), "--json")
    assert code == 0
    check(out, f"{name}.show.json")


def test_show_failures_in_doubt_and_logs(state_dir: Path) -> None:
    failed = show_record(load(RunDir(state_dir / "runs" / run_id_of("failed"))), now=0.0)
    assert [(f["step"], f["item"], f["kind"]) for f in failed["failures"]] == [
        ("convert", "docs/missing.md", "tool-error")
    ]
    assert "Markdown file not found: docs/missing.md" in failed["failures"][0]["error"]
    assert failed["steps"]["summary"] == {
        "status": "skipped",
        "reason": "dependency 'convert' failed",
        "succeeded": 0,
        "failed": 0,
        "running": 0,
        "in_doubt": 0,
        "reused": 0,
        "reconciled": 0,
    }
    doubt = show_record(load(RunDir(state_dir / "runs" / run_id_of("in_doubt"))), now=0.0)
    assert (doubt["status"], doubt["exit_code"], doubt["failures"]) == ("in-doubt", 5, [])
    assert [(d["item"], d["kind"]) for d in doubt["in_doubt"]] == [("docs/missing.md", "timeout")]
    crashed = show_record(load(RunDir(state_dir / "runs" / run_id_of("interrupted"))), now=0.0)
    assert crashed["status"] == "interrupted"
    assert crashed["steps"]["convert"]["status"] == "unfinished"
    assert {d["kind"] for d in crashed["in_doubt"]} == {None}
    ok = show_record(load(RunDir(state_dir / "runs" / run_id_of("succeeded"))), now=0.0)
    assert [(e["level"], e["data"][:8]) for e in ok["logs"]][:2] == [("warning", "notes.md"), ("info", "converte")]


def test_show_accepts_a_unique_prefix_or_suffix(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "show", "failed", "--state-dir", str(state_dir), "--json")
    assert code == 0 and json.loads(out)["run_id"].endswith("-failed")


def test_unknown_run_is_a_usage_error_listing_recent_ids(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("show", "logs"):
        code, out, err = cli(capsys, command, "20250101T000000.000000Z-nope00", "--state-dir", str(state_dir))
        assert (code, out) == (2, "")
        assert "no run '20250101T000000.000000Z-nope00'" in err
        assert "known runs: " in err and run_id_of("in_doubt") in err
    code, _, err = cli(capsys, "show", "2026", "--state-dir", str(state_dir))  # ambiguous prefix
    assert code == 2 and "'2026' matches 5 runs" in err
    assert all(run_id_of(name) in err for name in JOURNALS)  # the candidates, listed


def test_abbreviated_ids_a_unique_prefix_or_suffix(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for ref in ("20260102T0404", "040405.000000Z-failed", "failed"):
        code, out, _ = cli(capsys, "show", ref, "--state-dir", str(state_dir), "--json")
        assert code == 0, ref
        assert json.loads(out)["run_id"] == run_id_of("failed")
    code, out, _ = cli(capsys, "logs", "succee", "--state-dir", str(state_dir))
    assert code == 0 and "run finished succeeded" in out
    code, _, err = cli(capsys, "show", "Z-", "--state-dir", str(state_dir))  # neither prefix nor suffix: none
    assert code == 2 and "no run 'Z-'" in err
    code, _, err = cli(capsys, "logs", "20260102T0", "--state-dir", str(state_dir))
    assert code == 2 and "matches 5 runs" in err


def test_prune_keeps_the_newest_finished_and_never_unfinished_running_or_unreadable(
    state_dir: Path, running: RunLock, capsys: pytest.CaptureFixture[str]
) -> None:
    corrupt = state_dir / "runs" / "20250101T000000.000000Z-broken"
    corrupt.mkdir()
    (corrupt / "journal.jsonl").write_text("not json\n")
    code, out, _ = cli(capsys, "runs", "--state-dir", str(state_dir), "--prune", "--keep", "1")
    assert code == 0
    left = sorted(p.name[-6:] for p in (state_dir / "runs").iterdir())
    # 3 closed runs (succeeded, failed, fanout): the newest by id stays; a run in doubt is open, never pruned
    assert left == ["broken", "fanout", "in_dou", "interr", "runnin"]
    assert out.startswith("removed 2 finished run(s)")
    code, out, _ = cli(capsys, "runs", "--state-dir", str(state_dir), "--prune", "--keep", "0", "--json")
    assert json.loads(out) == {"removed": [run_id_of("fanout")]}


def test_prune_needs_keep(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "runs", "--state-dir", str(state_dir), "--prune")
    assert code == 2 and "--prune needs --keep N" in err
    code, _, err = cli(capsys, "runs", "--state-dir", str(state_dir), "--keep", "3")
    assert code == 2 and "--keep goes with --prune" in err


# -- logs -------------------------------------------------------------------------------------------------


def test_logs_prints_log_and_progress_events(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "logs", run_id_of("succeeded"), "--state-dir", str(state_dir))
    assert code == 0
    check(out, "succeeded.logs.txt")
    code, out, _ = cli(
        capsys, "logs", run_id_of("succeeded"), "--state-dir", str(state_dir), "--level", "warning",
        "--no-progress-events",
    )  # fmt: skip
    assert [line for line in out.splitlines() if " step " not in line] == [
        "03:04:05.000 run started",
        "03:04:05.640 log warning docs: notes.md has no heading; titled it 'notes'",
        "03:04:06.520 run finished succeeded",
    ]
    assert "03:04:05.240 step convert started: 3 items" in out  # steps start and finish, in order


def test_format_event() -> None:
    ts = "2026-01-02T03:04:05.250Z"
    progress = {"ts": ts, "type": "progress", "step": "s", "item": "k", "progress": 3.0, "total": None}
    assert format_event(progress) == "03:04:05.250 progress s[k] 3"
    assert format_event({"ts": ts, "type": "item_succeeded"}) is None


def test_journal_tail_waits_for_the_rest_of_a_line() -> None:
    tail = JournalTail()
    line = b'{"seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"log","server":"s","level":"info","data":"x"}\n'
    event = {"seq": 1, "ts": "2026-01-01T00:00:00.000Z", "type": "log", "server": "s", "level": "info", "data": "x"}
    assert tail.feed(line[:10]) == []
    assert tail.feed(line[10:] + line[:5]) == [event]
    assert tail.feed(line[5:]) == [event]


def test_follow_reads_appended_lines_until_the_lock_is_released(tmp_path: Path) -> None:
    """The run writes between polls; the follower stops once no process holds the run (or it finishes)."""
    journal = tmp_path / "journal.jsonl"
    lines = [json.dumps(encode(entry({"type": "log", "data": f"m{n}"}, seq=n))) + "\n" for n in range(1, 6)]
    journal.write_text(lines[0])
    alive = [True]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # the run makes progress while the follower sleeps
        sleeps.append(seconds)
        n = len(sleeps)
        chunk = {1: lines[1], 2: lines[2][:7], 3: lines[2][7:] + lines[3], 4: lines[4]}[n]
        with journal.open("a") as f:
            f.write(chunk)
        if n == 4:
            alive[0] = False  # the process exits after its last write

    seen = [e["data"] for e in follow(journal, running=lambda: alive[0], sleep=sleep, poll=0.2)]
    assert seen == ["m1", "m2", "m3", "m4", "m5"]
    # quick polls while lines come, the full interval after a poll that found only half a line
    assert sleeps == [0.05, 0.05, 0.2, 0.05]


def test_follow_stops_at_run_finished_and_without_follow(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    log, finished = entry({"type": "log"}, seq=1), entry({"type": "run_finished"}, seq=2)
    journal.write_text("".join(json.dumps(encode(e)) + "\n" for e in (log, finished)))

    def never(seconds: float) -> Any:
        raise AssertionError("should not wait")

    assert len(list(follow(journal, running=lambda: True, sleep=never))) == 2
    journal.write_text(json.dumps(encode(log)) + "\n")
    assert len(list(follow(journal, running=lambda: True, sleep=never, keep_going=False))) == 1


def test_logs_show_tasks_as_the_views_do() -> None:
    ts = "2026-01-02T03:04:05.250Z"
    created = {"ts": ts, "type": "task_created", "step": "convert", "item": "3", "task_id": "t-123"}
    status = {"ts": ts, "type": "task_status", "step": "convert", "item": "3", "task_id": "t-123",
              "status": "working", "message": "40% ...\nstill going"}  # fmt: skip
    assert format_event(created) == "03:04:05.250 convert[3]: task t-123 created"
    assert format_event(status) == "03:04:05.250 convert[3]: task t-123 working: 40% ... still going"
    plain_step = {**status, "item": "", "status": "completed", "message": None}
    assert log_line(plain_step, 0) == "03:04:05.250 convert: task t-123 completed"
