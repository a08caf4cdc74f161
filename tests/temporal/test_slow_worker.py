"""A slow but live worker is never taken for dead: a server answering one call at a time, slowly, keeps a batch
activity running far longer than its heartbeat timeout (and than the worker's own SDK core allows an activity
that does not heartbeat through it: the timeout and 5 s), while the keeper beats on its fixed interval. Every
item runs once, in one attempt; none is in doubt."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.temporal.support import MODES, batch_attempts, cli, dev_server, in_process_worker, summary_of, target_of

pytestmark = pytest.mark.slow

ITEMS = 40
ANSWER_AFTER = 0.2  # seconds per call, one at a time: the batch runs for about 8 s, past the core's 1 + 5 s


def _slow_workflow(folder: Path, counts: Path) -> Path:
    command = json.dumps(
        [sys.executable, str(MODES), "count", "--count-file", str(counts), "--answer-after", str(ANSWER_AFTER)]
    )
    path = folder / "slow.yaml"
    path.write_text(
        f"""\
version: 1
name: slow
servers:
  slow:
    command: {command}
    max_concurrency: 1
inputs:
  items: {{type: array, default: {json.dumps([f"k{i:02d}" for i in range(ITEMS)])}}}
steps:
  call:
    server: slow
    tool: count
    for_each: ${{{{ inputs.items }}}}
    key: ${{{{ item }}}}
    args: {{key: '${{{{ item }}}}'}}
"""
    )
    return path


def test_a_slow_batch_on_a_live_worker_is_never_timed_out(tmp_path: Path) -> None:
    counts = tmp_path / "counts"
    workflow = _slow_workflow(tmp_path, counts)

    async def scenario() -> tuple[tuple[int, str, str], list[tuple[set[str], int]]]:
        async with dev_server() as env, in_process_worker(env, "slow"):
            result = await cli(
                str(workflow), "--engine", "temporal", "--temporal-address", target_of(env), "--task-queue", "slow",
                "--heartbeat-timeout", "1", "--json", timeout=90,
            )  # fmt: skip
            from runner.temporal.client import workflow_id

            handle = env.client.get_workflow_handle(workflow_id(summary_of(result[1])["run_id"]))
            return result, await batch_attempts(handle, env.client)

    (code, out, err), batches = asyncio.run(scenario())
    summary = summary_of(out)
    detail = f"exit {code}\nstderr: {err}\nbatches: {batches}"
    assert summary.get("in_doubt", []) == [], detail
    assert code == 0, detail
    assert [attempts for _keys, attempts in batches] == [1], detail  # one batch, one attempt: never timed out
    assert sorted(counts.read_text().split()) == [f"k{i:02d}" for i in range(ITEMS)], detail
