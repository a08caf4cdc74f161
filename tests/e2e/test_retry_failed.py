"""Recovering a batch from the command line: ``--retry-failed`` re-attempts what failed in the same run, and
every command mcp-run prints as advice works when pasted into the same shell, in the same directory.

The server is ``tests/fakes/mcp_modes.py count``: each execution of its ``count`` tool is a line in a file
(the ground truth of what ran); ``--fail`` keys answer a tool error on their first call only; ``--gate``
holds calls until a file exists. The workflows live in a subfolder and the commands run from its parent,
with no ``--state-dir``: runs are kept beside the workflow, not in the current directory.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import MODES, environment_without_state_dir
from tests.support import sigint_default

pytestmark = pytest.mark.integration

KEYS = [f"k{i:02d}" for i in range(20)]
FLAKY = ["k03", "k07", "k11"]


def write_workflow(tmp: Path, *, server: list[str], step: str) -> Path:
    folder = tmp / "workflows"
    folder.mkdir(exist_ok=True)
    workflow = folder / "batch.yaml"
    command = json.dumps([sys.executable, str(MODES), *server])
    workflow.write_text(f"version: 1\nservers:\n  modes:\n    command: {command}\nsteps:\n{step}")
    return workflow


def fan_out(keys: list[str], extra: str = "") -> str:
    return f"""  each:
    server: modes
    tool: count
    for_each: {json.dumps(keys)}
    key: "${{{{ item }}}}"
    args: {{key: "${{{{ item }}}}"}}
{extra}"""


def mcp_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        env=environment_without_state_dir(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def paste(cwd: Path, line: str) -> subprocess.CompletedProcess[str]:
    """Run a printed ``mcp-run ...`` line as a shell would (its words, its ``# comment`` left out)."""
    words = shlex.split(line, comments=True)
    assert words[0] == "mcp-run", line
    return mcp_run(cwd, *words[1:])


def run_dirs(workflow: Path) -> list[Path]:
    return sorted((workflow.parent / ".mcp-run" / "runs").iterdir())


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]


def printed_commands(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if line.strip().startswith("mcp-run ")]


def test_retry_failed_re_attempts_the_failed_items_in_the_same_run(tmp_path: Path) -> None:
    count = tmp_path / "count.txt"
    after = '  after:\n    server: modes\n    tool: echo\n    needs: [each]\n    args: {text: "all done"}\n'
    workflow = write_workflow(
        tmp_path, server=["count", "--count-file", str(count), "--fail", ",".join(FLAKY)], step=fan_out(KEYS, after)
    )
    first = mcp_run(tmp_path, "workflows/batch.yaml", "--json")
    assert first.returncode == 1, first.stderr
    summary = json.loads(first.stdout)
    assert summary["steps"]["each"]["failed"] == 3 and summary["steps"]["after"]["status"] == "skipped"
    [run_dir] = run_dirs(workflow)

    # A closed failed run is not resumed without --retry-failed; the refusal says what to run.
    refused = mcp_run(tmp_path, "resume", "workflows/batch.yaml", run_dir.name[-6:])
    assert refused.returncode == 2
    assert "--retry-failed" in refused.stderr
    assert mcp_run(tmp_path, "workflows/batch.yaml", "--retry-failed", "--new-run").returncode == 2

    retried = mcp_run(tmp_path, "workflows/batch.yaml", "--retry-failed", "--json")
    assert retried.returncode == 0, retried.stderr
    summary = json.loads(retried.stdout)
    assert summary["run_id"] == run_dir.name and summary["status"] == "succeeded"
    assert summary["steps"]["each"]["succeeded"] == 20 and summary["steps"]["each"]["reused"] == 17
    assert summary["steps"]["after"]["status"] == "succeeded"  # skipped because of the failure: runs now
    executions = Counter(count.read_text().split())
    assert sum(executions.values()) == 23
    assert {key for key, n in executions.items() if n == 2} == set(FLAKY)
    assert run_dirs(workflow) == [run_dir]  # the same run

    # The journal keeps every attempt.
    journal = events(run_dir)
    kinds = [e["type"] for e in journal]
    assert [(e["type"], e.get("status")) for e in journal if e["type"].startswith("run_")] == [
        ("run_started", None),
        ("run_finished", "failed"),
        ("run_resumed", None),
        ("run_finished", "succeeded"),
    ]
    assert next(e for e in journal if e["type"] == "run_resumed")["retry_failed"] is True
    assert sorted(e["item"] for e in journal if e["type"] == "item_failed") == FLAKY
    assert kinds.count("item_dispatched") == 23 + 1  # and `after`, once

    # `runs` and `show` count the new attempt.
    listed = mcp_run(tmp_path, "runs", "workflows/batch.yaml", "--json")
    [record] = json.loads(listed.stdout)["runs"]
    assert (record["status"], record["items"]["succeeded"], record["items"]["failed"]) == ("succeeded", 21, 0)
    shown = json.loads(mcp_run(tmp_path, "show", "workflows/batch.yaml", "--json").stdout)
    assert (shown["status"], shown["failures"], shown["steps"]["each"]["failed"]) == ("succeeded", [], 0)

    again = mcp_run(tmp_path, "workflows/batch.yaml", "--retry-failed")
    assert again.returncode == 0 and "nothing to retry" in again.stderr
    assert sum(Counter(count.read_text().split()).values()) == 23


def test_retry_failed_without_a_run_is_a_usage_error(tmp_path: Path) -> None:
    write_workflow(tmp_path, server=["count", "--count-file", str(tmp_path / "count.txt")], step=fan_out(["a"]))
    result = mcp_run(tmp_path, "workflows/batch.yaml", "--retry-failed")
    assert result.returncode == 2
    assert "no run of workflows/batch.yaml" in result.stderr
    assert not (tmp_path / "count.txt").exists()


def test_the_printed_resume_command_after_an_interrupt_resumes_the_run(tmp_path: Path) -> None:
    count, gate = tmp_path / "count.txt", tmp_path / "gate"
    workflow = write_workflow(
        tmp_path,
        server=["count", "--count-file", str(count), "--gate", str(gate)],
        step=fan_out(["a", "b", "c"], "    concurrency: 1\n"),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "workflows/batch.yaml", "--grace", "60"],
        env=environment_without_state_dir(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        preexec_fn=sigint_default,  # interrupted below
    )
    try:
        deadline = time.monotonic() + 60
        while not any(e["type"] == "item_dispatched" for d in _dirs(workflow) for e in events(d)):
            assert proc.poll() is None and time.monotonic() < deadline, "the run never dispatched"
            time.sleep(0.01)  # polling a file another process writes; bounded by the deadline
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)  # let it take the signal (drain) before the call in flight may finish
        gate.touch()
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    [command] = printed_commands(err.split("resume it with:")[1])
    assert "--state-dir" not in command  # the workflow names where its runs are
    resumed = paste(tmp_path, command)
    assert resumed.returncode == 0, resumed.stderr
    [run_dir] = run_dirs(workflow)
    assert [e["type"] for e in events(run_dir)].count("run_resumed") == 1
    assert Counter(count.read_text().split()) == {"a": 1, "b": 1, "c": 1}


def test_the_printed_decision_after_exit_5_resumes_the_run_and_retry_failed_leaves_it_skipped(
    tmp_path: Path,
) -> None:
    workflow = write_workflow(tmp_path, server=["silent"], step=fan_out(["a"], "    timeout: 0.5\n"))
    stopped = mcp_run(tmp_path, "workflows/batch.yaml")
    assert stopped.returncode == 5, stopped.stderr
    commands = printed_commands(stopped.stderr)
    assert len(commands) == 3
    rerun, skip, accept = commands
    assert "--rerun-in-doubt" in rerun and "--skip-in-doubt" in skip and "--accept-in-doubt" in accept
    # The run stays open: a plain run is refused, and the command it prints calls nothing and asks again.
    refused = mcp_run(tmp_path, "workflows/batch.yaml")
    assert refused.returncode == 2
    [finish] = printed_commands(refused.stderr)
    again = paste(tmp_path, finish)
    assert again.returncode == 5, again.stderr
    [run_dir] = run_dirs(workflow)
    assert [e["type"] for e in events(run_dir)].count("item_dispatched") == 1

    skipped = paste(tmp_path, skip)
    assert skipped.returncode == 1, skipped.stderr  # a skipped item counts as failed
    assert run_dirs(workflow) == [run_dir]
    assert events(run_dir)[-1]["type"] == "run_finished"

    # --retry-failed reopens the run, but an item skipped in doubt is not called again.
    dispatched = [e["type"] for e in events(run_dir)].count("item_dispatched")
    retried = mcp_run(tmp_path, "workflows/batch.yaml", "--retry-failed")
    assert retried.returncode == 1, retried.stderr
    journal = events(run_dir)
    assert [e["type"] for e in journal].count("item_dispatched") == dispatched
    assert [e["type"] for e in journal].count("run_resumed") == 3  # the blocked --resume, the skip, the retry


def _dirs(workflow: Path) -> list[Path]:
    runs = workflow.parent / ".mcp-run" / "runs"
    return [d for d in runs.iterdir() if (d / "journal.jsonl").exists()] if runs.exists() else []
