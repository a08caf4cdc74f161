"""``reconcile:`` on Temporal, through the same step machine as locally: a call whose server died after executing
it is settled at the step's end by asking (``done``); one whose server died before executing it is "not done" then,
which is not acted on (it stays in doubt); ``resume --engine temporal`` with no decision asks again and calls it.
Every key is executed exactly once, and the verdicts are in the run's journal as its history replays it."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from runner.engine.core.cache import cache_digest
from tests.temporal.support import MODES, cli, dev_server, in_process_worker, target_of

pytestmark = pytest.mark.slow


def _workflow(tmp: Path, count_file: Path) -> Path:
    command = [sys.executable, str(MODES), "count", "--count-file", str(count_file), "--die-once", "a"]
    command += ["--lose-once", "b"]
    path = tmp / "wf.yaml"
    path.write_text(
        f"""version: 1
servers:
  modes:
    command: {json.dumps(command)}
    max_concurrency: 1
steps:
  count:
    server: modes
    tool: count
    for_each: [a, b, c]
    key: ${{{{ item }}}}
    args: {{key: '${{{{ item }}}}'}}
    reconcile:
      tool: was_counted
      args: {{key: '${{{{ key }}}}'}}
      done: ${{{{ result.json.counted }}}}
      idempotent: true
  after:
    server: modes
    tool: count
    needs: [count]
    args: {{key: after}}
"""
    )
    return path


@pytest.mark.parametrize("how", ["resume RUN_ID", "FILE --resume"])
def test_reconcile_on_temporal_settles_what_it_can_and_a_resume_with_no_decision_the_rest(
    tmp_path: Path, how: str
) -> None:
    counts = tmp_path / "counts.txt"
    path = _workflow(tmp_path, counts)

    async def on_temporal() -> list[tuple[int, str, str]]:
        async with dev_server() as env, in_process_worker(env, "reconcile"):
            here = ("--temporal-address", target_of(env))
            seen = [await cli(str(path), "--engine", "temporal", *here, "--task-queue", "reconcile")]
            run_id = seen[0][2].split()[1]
            if how == "resume RUN_ID":
                seen.append(await cli("resume", run_id, "--engine", "temporal", *here))
            else:
                seen.append(
                    await cli(str(path), "--resume", "--engine", "temporal", *here, "--task-queue", "reconcile")
                )
            seen.append(await cli("export", run_id, "--engine", "temporal", *here))
            return seen

    (code, _, err), (resumed, _, resume_err), (_, export, _) = asyncio.run(on_temporal())
    assert code == 5, err
    assert resumed == 0, resume_err
    assert Counter(counts.read_text().split()) == Counter({"a": 1, "b": 1, "c": 1, "after": 1})
    events = [json.loads(line) for line in export.splitlines() if line.strip()]
    verdicts = [(e["item"], e["verdict"]) for e in events if e["type"] == "item_reconciled"]
    assert verdicts == [("a", "done"), ("b", "error"), ("b", "not-done")]
    [at_end] = [e for e in events if e["type"] == "item_reconciled" and e["verdict"] == "error"]
    assert "may still be running" in at_end["error"]
    assert not [e for e in events if e["type"] == "doubt_decided"]


def test_an_item_its_reconcile_tool_says_not_done_is_called_as_a_call_never_made_is(tmp_path: Path) -> None:
    """Its step's cache asked first, as locally (the step machine's ``call_or_reuse``, the rule both executors
    follow before a call): the call is keyed as it is made. Here its ``cache_key`` reads an earlier step's answer
    (a version), which changed between the attempts (a tool error first, ``continue_on_error``; called again on
    resume): the key journaled is that of the call made, so the file's next run reuses its result."""
    counts = tmp_path / "counts.txt"
    command = [sys.executable, str(MODES), "count", "--count-file", str(counts), "--lose-once", "b", "--fail", "v"]
    path = tmp_path / "cached.yaml"
    path.write_text(
        f"""version: 1
servers:
  modes: {{command: {json.dumps(command)}, max_concurrency: 1}}
steps:
  version:
    server: modes
    tool: count
    args: {{key: v}}
    continue_on_error: true
  count:
    server: modes
    tool: count
    needs: [version]
    for_each: [a, b]
    key: ${{{{ item }}}}
    args: {{key: '${{{{ item }}}}'}}
    cache: 7d
    cache_key: ${{{{ steps.version.text }}}}
    reconcile:
      tool: was_counted
      args: {{key: '${{{{ key }}}}'}}
      done: ${{{{ result.json.counted }}}}
      idempotent: true
"""
    )

    async def on_temporal() -> list[tuple[int, str, str]]:
        async with dev_server() as env, in_process_worker(env, "reconcile-cache"):
            here = ("--temporal-address", target_of(env))
            first = await cli(str(path), "--engine", "temporal", *here, "--task-queue", "reconcile-cache")
            run_id = first[2].split()[1]
            resumed = await cli("resume", run_id, "--engine", "temporal", *here)
            again = await cli(str(path), "--engine", "temporal", *here, "--task-queue", "reconcile-cache", "--json")
            return [first, resumed, again, await cli("export", run_id, "--engine", "temporal", *here)]

    (code, _, err), (resumed, _, resume_err), (second, out, second_err), (_, export, _) = asyncio.run(on_temporal())
    assert (code, resumed, second) == (5, 0, 0), (err, resume_err, second_err)
    events = [json.loads(line) for line in export.splitlines() if line.strip()]
    made = [e["cache"] for e in events if e["type"] == "item_succeeded" and e["item"] == "b"]
    assert made == [cache_digest("modes", "count", {"key": "b"}, "v")]  # keyed with the version the call had
    # a: executed in the first attempt (version "v: failed..."), again in the next run (version "v"); b, lost before
    # it ran, executed once, on the resume (version "v"), and reused by the next run
    assert Counter(counts.read_text().split()) == Counter({"v": 3, "a": 2, "b": 1})
    assert json.loads(out)["steps"]["count"]["reused"] == 1
