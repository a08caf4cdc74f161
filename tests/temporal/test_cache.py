"""``cache:`` on Temporal, through the step machine both executors share: a second run of the file reuses the
results the first left (counted as reused, with the run they came from), calls only the new items, and
``--no-cache`` calls all. The server records each execution in its count file (the ground truth)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.temporal.support import MODES, cli, dev_server, in_process_worker, summary_of, target_of


def workflow(folder: Path, count_file: Path) -> Path:
    path = folder / "cached.yaml"
    command = json.dumps([sys.executable, str(MODES), "count", "--count-file", str(count_file)])
    path.write_text(
        f"""\
version: 1
servers:
  modes: {{command: {command}}}
inputs:
  items: {{type: array}}
steps:
  call:
    server: modes
    tool: count
    for_each: ${{{{ inputs.items }}}}
    key: ${{{{ item }}}}
    args: {{key: "${{{{ item }}}}"}}
    cache: 7d
outputs:
  texts: ${{{{ steps.call.results[*].text }}}}
"""
    )
    return path


def test_a_second_run_on_temporal_reuses_the_first_runs_results(tmp_path: Path) -> None:
    count_file = tmp_path / "count.txt"
    path = workflow(tmp_path, count_file)
    ten = json.dumps([f"k{i:02d}" for i in range(10)])
    thirteen = json.dumps([f"k{i:02d}" for i in range(13)])

    async def on_temporal() -> list[tuple[int, str, str]]:
        async with dev_server() as env, in_process_worker(env, "cache"):
            where = ("--temporal-address", target_of(env), "--task-queue", "cache", "--json")
            runs = [await cli(str(path), "--engine", "temporal", *where, "--input", f"items={ten}")]
            runs.append(await cli(str(path), "--engine", "temporal", *where, "--input", f"items={thirteen}"))
            runs.append(await cli(str(path), "--engine", "temporal", *where, "--input", f"items={ten}", "--no-cache"))
            return runs

    (c1, o1, e1), (c2, o2, e2), (c3, _o3, e3) = asyncio.run(on_temporal())
    assert (c1, c2, c3) == (0, 0, 0), (e1, e2, e3)
    executed = count_file.read_text().split()
    assert len(executed) == 10 + 3 + 10
    assert sorted(executed[10:13]) == ["k10", "k11", "k12"]
    second = summary_of(o2)
    assert second["steps"]["call"]["reused"] == 10 and second["steps"]["call"]["succeeded"] == 13
    assert second["outputs"]["texts"] == [f"k{i:02d}" for i in range(13)]
    assert summary_of(o1)["steps"]["call"]["reused"] == 0
