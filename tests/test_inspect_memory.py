"""``runs``, ``show`` and ``logs`` read journals in bounded memory: peaks measured with ``tracemalloc`` (what
Python allocates, the same on any machine), never with a clock.

- ``logs`` reads a journal a chunk at a time: its peak does not grow with the journal.
- ``runs`` reads a run that ended at its two ends (its last record carries the counts); a run without an
  end record (a crash) is folded keeping neither results nor log messages.
- ``show`` folds line by line, keeping no results.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.cli.journaltail import follow
from runner.cli.runrecord import load, run_record
from runner.engine.journal.listing import summarize
from runner.engine.journal.rundir import RunDir
from tests.support import write_big_journal

MB = 1 << 20


def peak(work: Callable[[], Any]) -> tuple[Any, int]:
    """What ``work`` returns, and the most memory Python held at once while it ran, over what it held before."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def run_dir(tmp_path: Path, name: str = "20260101T000000.000000Z-bigrun") -> RunDir:
    path = tmp_path / "state" / "runs" / name
    path.mkdir(parents=True)
    return RunDir(path)


def test_logs_reads_a_chunk_at_a_time(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    write_big_journal(run.journal, 12_000)  # about 8.5 MB
    assert run.journal.stat().st_size > 8_000_000

    def count_events() -> int:
        return sum(1 for _ in follow(run.journal, running=lambda: False, keep_going=False))

    events, used = peak(count_events)
    assert events == 2 + 12_000 * 2 + 1_200 + 2
    assert used < 5 * MB  # a chunk of 1 MiB, its lines, their events; not the journal (8.5 MB) nor its events


def test_runs_reads_an_ended_run_at_its_two_ends(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    write_big_journal(run.journal, 12_000)
    summary, used = peak(lambda: summarize(run))
    record = run_record(summary, now=0.0)
    assert record["status"] == "succeeded" and record["exit_code"] == 0
    assert record["items"] == {
        "succeeded": 12_000,
        "failed": 0,
        "running": 0,
        "in_doubt": 0,
        "reused": 0,
        "reconciled": 0,
    }
    assert used < MB // 2  # two lines' worth; folding 12,000 items would take several MB


def test_runs_folds_a_crashed_run_without_its_logs_or_results(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    # 500 items, each with a log message of 8 KB and a result of 8 KB: 8 MB that a listing needs none of.
    write_big_journal(run.journal, 500, result_chars=8_000, log_every=1, log_chars=8_000, ended=False)
    assert run.journal.stat().st_size > 8_000_000
    summary, used = peak(lambda: summarize(run))
    assert summary.shown_status == "interrupted"  # no end record, no process: it crashed
    assert summary.counts == {"succeeded": 500, "failed": 0, "running": 0, "in_doubt": 0, "reused": 0, "reconciled": 0}
    assert used < 2 * MB


def test_show_keeps_no_results(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    write_big_journal(run.journal, 400, result_chars=20_000, log_every=0)  # 8 MB of results
    assert run.journal.stat().st_size > 8_000_000
    loaded, used = peak(lambda: load(run))
    assert loaded.summary.damaged is None and loaded.state.steps["each"].counts().succeeded == 400
    assert used < 2 * MB
