"""kill -9 of a worker mid-batch, two workers, a tool that is not safe to repeat (it counts its executions):
every item executed at most once, and the items in doubt are exactly those the dead worker had marked
dispatched (begun, never ended); every other item ran once. (The dead worker's server may still execute some of
those in doubt before it notices its parent is gone: that is why they are in doubt, not failed.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.temporal.support import (
    ROOT,
    cli,
    dev_server,
    dispatched_by_worker,
    fan_out_workflow,
    start_worker,
    summary_of,
    target_of,
)

pytestmark = pytest.mark.slow

ITEMS = 120
CONCURRENCY = 8  # the workflow's max_concurrency (tests.temporal.support.fan_out_workflow)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_worker_lost_mid_batch_duplicates_nothing(tmp_path: Path, how: str) -> None:
    """``kill``: kill -9. ``stop``: SIGSTOP, a zombie that wakes up (SIGCONT) once its activities were tried
    again elsewhere: its next dispatches need a heartbeat Temporal no longer accepts, so none goes out."""
    gate, counts = tmp_path / "gate", tmp_path / "counts"
    workflow = fan_out_workflow(tmp_path, ITEMS, mode="count", extra=f"--count-file {counts} --gate {gate}")
    keys = {f"k{i:04d}" for i in range(ITEMS)}

    async def scenario() -> tuple[int, dict[str, Any], set[str], list[str], tuple[int, str, str]]:
        async with dev_server() as env:
            address = target_of(env)
            workers = [await start_worker(address, "kill"), await start_worker(address, "kill")]
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "runner", str(workflow), "--engine", "temporal", "--temporal-address", address,
                "--task-queue", "kill", "--json", "--batch-size", "20", "--heartbeat-timeout", "2",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
            )  # fmt: skip
            try:
                assert run.stderr is not None
                first = (await asyncio.wait_for(run.stderr.readline(), 30)).decode()
                run_id = first.split()[1]
                handle = env.client.get_workflow_handle(f"mcp-run/{run_id}")
                # Both workers hold calls in flight, as many as the server's max_concurrency (their servers wait for
                # the gate, so no more go out): the markers recorded are those of every call begun.
                deadline = time.monotonic() + 60
                while True:
                    marked = await dispatched_by_worker(handle, env.client.data_converter)
                    if len(marked) == 2 and all(len(k) == CONCURRENCY for k in marked.values()):
                        break
                    assert time.monotonic() < deadline, marked
                    await asyncio.sleep(0.1)
                victim = workers[0]
                identity = next(w for w in marked if w.startswith(f"{victim.pid}@"))
                if how == "kill":
                    os.kill(victim.pid, signal.SIGKILL)
                    await victim.wait()
                else:
                    os.kill(victim.pid, signal.SIGSTOP)
                begun = marked[identity]
                gate.touch()
                out, _err = await asyncio.wait_for(run.communicate(), 120)
                assert run.returncode is not None
                if how == "stop":
                    os.kill(victim.pid, signal.SIGCONT)  # the zombie wakes up, its activities long given away
                    await asyncio.sleep(3)  # (real time: what it would send, it sends now)
                before = counts.read_text().split()
                # The run waits for a decision: --rerun-in-doubt calls those items again and finishes it.
                where = ("--temporal-address", address, "--task-queue", "kill")
                resumed = await cli("resume", run_id, "--engine", "temporal", *where, "--rerun-in-doubt", "--json")
                return run.returncode, summary_of(out.decode()), begun, before, resumed
            finally:
                for proc in workers:
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGCONT)
                        proc.send_signal(signal.SIGINT)
                        await asyncio.wait_for(proc.wait(), 30)

    code, summary, begun, executed, (resumed_code, resumed_out, resumed_err) = asyncio.run(scenario())
    in_doubt = {d["item"] for d in summary["in_doubt"]}
    assert len(executed) == len(set(executed)), "an item ran twice"
    assert begun and in_doubt == begun, (sorted(in_doubt), sorted(begun))
    assert set(executed) >= keys - in_doubt  # every item not in doubt ran (once); those in doubt at most once
    assert code == 5
    assert summary["status"] == "in-doubt"
    assert summary["steps"]["call"]["succeeded"] == ITEMS - len(begun)
    assert resumed_code == 0, resumed_err
    resumed = summary_of(resumed_out)
    assert resumed["status"] == "succeeded"
    assert resumed["steps"]["call"]["succeeded"] == ITEMS
    assert resumed["steps"]["call"]["reused"] == ITEMS - len(begun)
    after = counts.read_text().split()
    assert set(after) == keys
    assert {k for k in after if after.count(k) > 1} <= in_doubt  # again only what the decision said to call again
    print(json.dumps({"items": ITEMS, "in_doubt": len(in_doubt), "executed": len(executed)}))
