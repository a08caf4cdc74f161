"""A Temporal run's events rebuilt from its workflow history (:mod:`runner.temporal.history`): the same as a
worker answers with the ``events`` query, for an open run and a closed one; and ``show``, ``logs`` and
``export`` work with no worker running (they asked a worker before: with none they waited ~30 s, then
exited 2)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.temporal.support import cli, dev_server, fan_out_workflow, in_process_worker, target_of

pytestmark = pytest.mark.slow


def test_events_from_the_history_are_the_workers_and_need_no_worker(tmp_path: Path) -> None:
    from runner.temporal.client import events_of, workflow_id
    from runner.temporal.history import events_from_history

    gate = tmp_path / "gate"  # the calls wait for it
    workflow = fan_out_workflow(tmp_path, 3, mode="count", extra=f"--count-file {tmp_path / 'counts'} --gate {gate}")

    async def on_temporal() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with dev_server() as env:
            where = ("--engine", "temporal", "--temporal-address", target_of(env))
            async with in_process_worker(env, "hist"):
                code, _out, err = await cli(str(workflow), *where, "--task-queue", "hist", "--detach")
                assert code == 0, err
                run_id = got["run_id"] = err.split()[1]
                deadline = time.monotonic() + 60
                while not any(e["type"] == "step_started" for e in await events_of(env.client, run_id)):
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
                # open, its calls in flight: the history so far gives what the worker says
                got["open"] = (await events_from_history(env.client, run_id), await events_of(env.client, run_id))
                gate.touch()
                await env.client.get_workflow_handle(workflow_id(run_id)).result()
                got["closed"] = (await events_from_history(env.client, run_id), await events_of(env.client, run_id))
            # no worker from here on
            got["show"] = await cli("show", run_id, *where, "--json")
            got["logs"] = await cli("logs", run_id, *where)
            got["export"] = await cli("export", run_id, *where)
            got["unknown"] = await cli("export", "20260101-000000-abcdef", *where)
        return got

    got = asyncio.run(on_temporal())
    history, query = got["open"]
    assert history == query
    assert [e["type"] for e in history][:2] == ["run_started", "step_started"]
    assert not any(e["type"] == "run_finished" for e in history)
    history, query = got["closed"]
    assert history == query
    assert history[-1]["type"] == "run_finished" and history[-1]["status"] == "succeeded"
    assert sum(e["type"] == "item_succeeded" for e in history) == 3

    for name in ("show", "logs", "export"):
        assert got[name][0] == 0, (name, got[name][2])
    assert [json.loads(line) for line in got["export"][1].splitlines()] == history
    shown = json.loads(got["show"][1])
    assert shown["run_id"] == got["run_id"] and shown["status"] == "succeeded"
    lines = [line.split(" ", 1)[1] for line in got["logs"][1].splitlines()]
    assert lines[0] == "run started" and lines[-1] == "run finished succeeded", lines
    code, _out, err = got["unknown"]
    assert code == 2 and "no run 20260101-000000-abcdef on Temporal" in err, err
