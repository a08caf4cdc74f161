"""Child workflow ids are the run's own: a child of a closed run that is still open (its cancel not yet
processed: no worker of its task queue) does not keep the next run of the same file from starting its
children (every run of a file has the same workflow id)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runner.temporal.spec import CHILD_ITEMS_VARIABLE
from tests.temporal.support import cli, dev_server, eventually, fan_out_workflow, in_process_worker, target_of

pytestmark = pytest.mark.slow


def test_the_next_run_of_a_file_starts_its_children_beside_a_closed_runs_open_children(tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # never opened: the calls wait
    workflow = fan_out_workflow(tmp_path, 3, mode="count", extra=f"--count-file {tmp_path / 'counts'} --gate {gate}")

    async def on_temporal() -> tuple[list[str], str]:
        async with dev_server() as env:
            address = ("--temporal-address", target_of(env))

            async def start(queue: str) -> Any:
                code, _out, err = await cli(str(workflow), "--engine", "temporal", *address, "--task-queue", queue,
                                            "--detach", env={CHILD_ITEMS_VARIABLE: "2"})  # fmt: skip
                assert code == 0, err
                wid = err.split("(workflow ")[1].split(",")[0]
                return env.client.get_workflow_handle(wid)

            def children_of(handle: Any) -> Any:
                async def probe() -> Any:
                    children = (await handle.describe()).raw_description.pending_children
                    started = [(c.workflow_id, c.run_id) for c in children if c.run_id]
                    return started if len(started) == 2 else None

                return probe

            async with in_process_worker(env, "first"):
                first = await start("first")
                first = env.client.get_workflow_handle(first.id, run_id=(await first.describe()).run_id)
                old = await eventually(children_of(first), "the first run's two children")
            await first.terminate()  # its children are asked to cancel; no worker of "first" is left to do it
            async with in_process_worker(env, "second"):
                second = await start("second")
                new = await eventually(children_of(second), "the second run's two children", timeout=20)
                status = (await second.describe()).status
            return [w for w, _r in [*old, *new]], status.name if status is not None else ""

    ids, status = asyncio.run(on_temporal())
    assert status == "RUNNING"
    assert len(set(ids)) == 4
