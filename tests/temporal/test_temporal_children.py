"""Cancelling a run whose fan-out runs as child workflows cancels the children (and their calls)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runner.temporal.dag import WORKFLOW_NAME
from runner.temporal.spec import CHILD_ITEMS_VARIABLE
from tests.temporal.support import cli, dev_server, eventually, fan_out_workflow, in_process_worker, target_of

pytestmark = pytest.mark.slow


def test_cancelling_the_run_cancels_its_child_workflows(tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # never opened: the calls wait until the run is cancelled
    workflow = fan_out_workflow(tmp_path, 5, mode="count", extra=f"--count-file {tmp_path / 'counts'} --gate {gate}")

    async def on_temporal() -> tuple[str, list[str]]:
        async with dev_server() as env, in_process_worker(env, "can"):
            where = ("--temporal-address", target_of(env), "--task-queue", "can")
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where, "--detach",
                                        env={CHILD_ITEMS_VARIABLE: "2"})  # fmt: skip
            assert code == 0, err
            run_id = err.split()[1]

            async def the_run() -> Any:
                return [w async for w in env.client.list_workflows(f'WorkflowType="{WORKFLOW_NAME}"')]

            handle = env.client.get_workflow_handle((await eventually(the_run, "the run is listed"))[0].id)

            async def three_children() -> Any:
                children = (await handle.describe()).raw_description.pending_children
                return [c.workflow_id for c in children] if len(children) == 3 else None

            children = await eventually(three_children, "three child workflows (5 calls, at most 2 each)")
            code, _out, err = await cli("cancel", run_id, "--engine", "temporal", *where[:2])
            assert code == 0, err

            async def closed() -> Any:
                statuses = [(await env.client.get_workflow_handle(c).describe()).status for c in children]
                run = (await handle.describe()).status
                names = [s.name if s is not None else "" for s in [run, *statuses]]
                return names if "RUNNING" not in names else None

            names = await eventually(closed, "the run and its children closed")
            return names[0], names[1:]

    run, children = asyncio.run(on_temporal())
    assert run == "CANCELED"
    assert children == ["CANCELED"] * 3
