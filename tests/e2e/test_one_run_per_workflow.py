"""One run at a time per workflow: two invocations started at the same instant, whatever their flags, never
make two runs and never execute an item twice; the one that does not run exits 6 (busy) or 2 (an unfinished
run exists and it was not asked to resume, or there is nothing to resume).

Each trial holds the calls of whichever process runs behind a gate file (``mcp_modes.py count --gate``) until
the other process has exited, so the two always overlap, however the scheduler orders their start.
"""

from __future__ import annotations

import itertools
import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.support import MODES, environment_without_state_dir

pytestmark = pytest.mark.integration

ROUNDS_FRESH = 2
"""Each pair of flags races this many times on a fresh workflow (22 trials; 30 before, which raced 8 pairs three
times and 3 pairs twice: the gate makes every trial overlap, so evenness, not count, is what covers the pairs)."""
ITEMS = ["a", "b", "c"]


def write_workflow(folder: Path, count: Path, gate: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    workflow = folder / "wf.yaml"
    command = json.dumps([sys.executable, str(MODES), "count", "--count-file", str(count), "--gate", str(gate)])
    workflow.write_text(
        f"""version: 1
servers:
  modes:
    command: {command}
steps:
  each:
    server: modes
    tool: count
    for_each: {json.dumps(ITEMS)}
    key: "${{{{ item }}}}"
    args: {{key: "${{{{ item }}}}"}}
    idempotent: true
"""
    )
    return workflow


def start(cwd: Path, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner", *args, "--quiet"],
        env=environment_without_state_dir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )


def race(cwd: Path, gate: Path, a: list[str], b: list[str]) -> list[tuple[int, str]]:
    """Start both at once; open the gate when the first has exited; return (exit code, stderr) of each."""
    procs = [start(cwd, a), start(cwd, b)]
    try:
        deadline = time.monotonic() + 60
        while all(p.poll() is None for p in procs):
            assert time.monotonic() < deadline, "neither process exited: both are running the workflow"
            time.sleep(0.005)  # polling other processes; bounded by the deadline
        gate.touch()
        return [(p.wait(timeout=60), p.communicate()[1]) for p in procs]
    finally:
        gate.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()


def check(codes: list[tuple[int, str]], touched: int, count: Path, label: str) -> None:
    rcs = sorted(code for code, _ in codes)
    errors = "\n".join(err for _, err in codes)
    assert rcs[0] == 0 and rcs[1] in (2, 6), f"{label}: exit codes {rcs}\n{errors}"
    assert touched == 1, f"{label}: {touched} runs started or resumed\n{errors}"
    assert Counter(count.read_text().split()) == dict.fromkeys(ITEMS, 1), f"{label}: executions"
    busy = next((err for code, err in codes if code == 6), None)
    if busy is not None:  # the busy error names the holder and what to run to see it
        assert "process " in busy and "mcp-run runs " in busy, busy


FRESH_FLAGS = {"plain": [], "--resume": ["--resume"], "--new-run": ["--new-run"]}


@pytest.mark.slow
def test_two_invocations_on_a_fresh_workflow_make_one_run(tmp_path: Path) -> None:
    pairs = [*itertools.product(FRESH_FLAGS, repeat=2), ("--retry-failed", "plain"), ("--resume", "--retry-failed")]
    for trial in range(ROUNDS_FRESH * len(pairs)):
        first, second = pairs[trial % len(pairs)]
        folder = tmp_path / f"t{trial}"
        count, gate = folder / "count.txt", folder / "gate"
        workflow = write_workflow(folder / "workflows", count, gate)

        def args(flag: str) -> list[str]:
            return ["workflows/wf.yaml", *FRESH_FLAGS.get(flag, [flag])]

        codes = race(folder, gate, args(first), args(second))
        runs = list((workflow.parent / ".mcp-run" / "runs").iterdir())
        check(codes, len(runs), count, f"trial {trial} ({first}, {second})")


def open_run(folder: Path, workflow: Path, template: Path) -> str:
    """An interrupted run of ``workflow`` in ``template``: killed with its first call in flight (held at the
    gate, so never executed)."""
    proc = start(folder, [str(workflow), "--state-dir", str(template)])
    deadline = time.monotonic() + 60
    journal = None
    while journal is None or b"item_dispatched" not in journal.read_bytes():
        assert proc.poll() is None and time.monotonic() < deadline, "the run never dispatched"
        time.sleep(0.005)  # polling a file another process writes; bounded by the deadline
        journal = next(template.glob("runs/*/journal.jsonl"), None)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    return journal.parent.name


@pytest.mark.slow
def test_two_invocations_with_an_unfinished_run_continue_it_once(tmp_path: Path) -> None:
    count, gate = tmp_path / "count.txt", tmp_path / "gate"
    workflow = write_workflow(tmp_path / "workflows", count, gate)
    template = tmp_path / "template"
    run_id = open_run(tmp_path, workflow, template)
    assert not count.exists()
    flags = {
        "plain": [],
        "--resume": ["--resume"],
        "--new-run": ["--new-run"],
        "--retry-failed": ["--retry-failed"],
        "resume ID": None,
    }
    # Each two flags race once: 14 trials (20 before, over 20 of the 24 ordered pairs, in which two
    # `--retry-failed` never met). Which of two processes started at once takes the lock is the scheduler's
    # choice, not their order, so the order is alternated rather than every pair raced both ways.
    pairs = [pair for pair in itertools.combinations_with_replacement(flags, 2) if pair != ("plain", "plain")]
    for trial, pair in enumerate(pairs):
        first, second = pair if trial % 2 == 0 else pair[::-1]
        state = tmp_path / f"state{trial}"
        shutil.copytree(template, state)
        count.unlink(missing_ok=True)
        gate.unlink(missing_ok=True)

        def args(flag: str, state: Path = state) -> list[str]:
            chosen = flags[flag]
            if chosen is None:  # by id, abbreviated to its random part
                return ["resume", run_id[-6:], "--state-dir", str(state)]
            return ["workflows/wf.yaml", *chosen, "--state-dir", str(state)]

        codes = race(tmp_path, gate, args(first), args(second))
        new_runs = len(list((state / "runs").iterdir())) - 1
        journal = (state / "runs" / run_id / "journal.jsonl").read_text()
        resumed = journal.count('"type": "run_resumed"') + journal.count('"type":"run_resumed"')
        check(codes, new_runs + resumed, count, f"trial {trial} ({first}, {second})")
