"""``runner.run_workflow(..., engine="temporal")``: the Python API runs a workflow on Temporal's workers and
returns the same Outcome as the local engine (status, exit code, outputs); a second start while the run of the
file is open is the typed refusal exported from ``runner``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import runner
from runner.engine.core.vocabulary import RunStatus
from runner.engine.run import RunOptions
from runner.temporal.engine import TemporalEngine
from tests.temporal.support import dev_server, fan_out_workflow, in_process_worker, target_of

pytestmark = pytest.mark.slow


def test_run_workflow_on_temporal_returns_the_local_outcome(tmp_path: Path) -> None:
    path = fan_out_workflow(tmp_path, 3)
    local = runner.run_workflow(path, state_dir=tmp_path / "state")

    async def on_temporal() -> runner.Outcome:
        async with dev_server() as env, in_process_worker(env, "api"):
            options = runner.TemporalOptions(address=target_of(env), task_queue="api")
            return await asyncio.to_thread(runner.run_workflow, path, engine="temporal", temporal=options)

    remote = asyncio.run(on_temporal())
    assert remote.status is RunStatus.SUCCEEDED is local.status
    assert remote.exit_code == local.exit_code == 0
    assert remote.outputs == local.outputs == {"texts": ["xk0000", "xk0001", "xk0002"], "succeeded": 3}
    assert remote.run_id is not None and remote.run_id != local.run_id
    assert {name: step.status for name, step in remote.steps.items()} == {
        name: step.status for name, step in local.steps.items()
    }


def test_a_second_start_while_the_run_is_open_is_refused(tmp_path: Path) -> None:
    """No worker serves the queue: the first run stays open, and a second start of the file is refused."""
    path = fan_out_workflow(tmp_path, 1)

    async def twice() -> BaseException:
        async with dev_server() as env:
            options = runner.TemporalOptions(address=target_of(env), task_queue="nobody")
            engine = runner.engine_named("temporal", temporal=options)
            assert isinstance(engine, TemporalEngine)
            request = runner.RunRequest(path, RunOptions())
            first = await engine.start(request)
            with pytest.raises(runner.RunAlreadyOpen) as refused:
                await engine.start(request)
            assert refused.value.run_id == first.run_id
            return refused.value

    error = asyncio.run(twice())
    assert isinstance(error, runner.BusyError) and error.exit_code == 6
