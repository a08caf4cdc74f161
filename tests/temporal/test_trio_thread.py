"""The worker's trio thread outlives the errors of what it runs, and a worker hears when it ends.

A CI run saw every item of a run put in doubt: a batch cancelled while its heartbeat failed raised the
heartbeat's error inside its cancellation, that error left the bridge's task, ended the thread's nursery,
and every later activity failed with "the trio thread is not running" (on all its attempts). These pin the
three parts of the fix: the thread survives such an error; when it does end, the worker is told (and stops);
and an attempt that never began settles its items from the earlier attempts' markers, not all in doubt."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
import trio
from temporalio.testing import ActivityEnvironment

from runner.engine.core.vocabulary import FailureKind
from runner.temporal.activities import CallActivities
from runner.temporal.batch import Sessions
from runner.temporal.bridge import TrioThread
from runner.temporal.spec import RunSpec

WORKFLOW = """\
version: 1
name: fan
servers:
  s: {command: [echo]}
inputs:
  names: {type: array, default: [a, b, c]}
steps:
  first:
    server: s
    tool: t
    for_each: ${{ inputs.names }}
    key: "${{ item }}"
    args: {text: "${{ item }}"}
"""
WID = "mcp-run/0123456789abcdef"


async def _raises_when_cancelled() -> None:
    """A batch whose heartbeat fails as it is cancelled: the error is raised inside the cancellation."""
    async with trio.open_nursery() as nursery:

        async def beat() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise ValueError("heartbeat refused")

        nursery.start_soon(beat)
        await trio.sleep_forever()


async def _answer() -> int:
    return 42


def test_an_error_raised_while_cancelled_leaves_the_thread_running() -> None:
    async def main() -> int:
        thread = TrioThread()
        thread.start()
        try:
            task = asyncio.ensure_future(thread.run(_raises_when_cancelled))
            await asyncio.sleep(0.05)  # (real threads: the trio side starts the function)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not thread.ended().done()
            return await asyncio.wait_for(thread.run(_answer), 10)
        finally:
            thread.stop()

    assert asyncio.run(main()) == 42


def test_an_error_of_the_function_reaches_the_asyncio_side() -> None:
    async def fails() -> None:
        raise KeyError("no such server")

    async def main() -> None:
        thread = TrioThread()
        thread.start()
        try:
            with pytest.raises(KeyError, match="no such server"):
                await asyncio.wait_for(thread.run(fails), 10)
            assert await asyncio.wait_for(thread.run(_answer), 10) == 42
        finally:
            thread.stop()

    asyncio.run(main())


def test_the_worker_hears_when_the_thread_ends_by_a_failing_task() -> None:
    async def boom() -> None:
        raise OSError("a session's task failed")

    async def main() -> BaseException | None:
        thread = TrioThread()
        thread.start()
        ended = thread.ended()
        # a task of the thread's own nursery (a session's, say) fails: handed over with the thread's token
        cast(Any, thread)._token.run_sync_soon(thread.nursery.start_soon, boom)
        error = await asyncio.wait_for(ended, 10)
        with pytest.raises(RuntimeError, match="the trio thread is not running"):
            await thread.run(_answer)
        return error

    error = asyncio.run(main())
    assert isinstance(error, BaseExceptionGroup) and error.subgroup(OSError) is not None


def test_a_thread_stopped_ends_with_no_error_and_cancels_what_runs() -> None:
    async def main() -> BaseException | None:
        thread = TrioThread()
        thread.start()
        ended = thread.ended()
        running = asyncio.ensure_future(thread.run(trio.sleep_forever))
        await asyncio.sleep(0.05)
        await asyncio.get_running_loop().run_in_executor(None, thread.stop)
        with pytest.raises(asyncio.CancelledError):  # told, not left waiting for ever
            await asyncio.wait_for(running, 10)
        late = thread.ended()  # asked after the end: done at once
        assert late.done() and late.result() is None
        return await ended

    assert asyncio.run(main()) is None


class _Client:
    """Temporal as the activity sees it: the run's definition, and a heartbeat handle never used here."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec

    def get_workflow_handle(self, workflow_id: str, **kwargs: Any) -> Any:
        spec = self.spec

        class Handle:
            id, run_id = workflow_id, kwargs.get("run_id")

            async def query(self, name: str, *args: Any, **kw: Any) -> Any:
                return spec.to_json()

        return Handle()

    def get_async_activity_handle(self, **kwargs: Any) -> Any:
        return object()


def _gone_thread_batch(tmp_path: Path, *, attempt: int, prior: dict[str, Any] | None) -> Any:
    spec = RunSpec(run_id="a", workflow=str(tmp_path / "w.yaml"), text=WORKFLOW)
    env = ActivityEnvironment(client=cast(Any, _Client(spec)))
    env.info = replace(env.info, attempt=attempt, heartbeat_details=[prior] if prior is not None else [])
    gone = TrioThread()  # never started: as a thread that ended
    activities = CallActivities(thread=gone, sessions=Sessions(nursery=cast(Any, None)))
    piece = {"start": 0, "stop": 3, "skip": []}
    request = {"plan_key": spec.plan_key, "run": WID, "run_id": "t-a", "step": "first", "slice": piece}
    return asyncio.run(env.run(activities.call_batch, request))


def test_a_last_attempt_that_never_began_settles_from_the_earlier_attempts_markers(tmp_path: Path) -> None:
    ended = {"status": "succeeded", "result": {"content": []}}
    prior = {"dispatched": ["b"], "ended": {"a": ended}}
    outcomes = {o["key"]: o for o in _gone_thread_batch(tmp_path, attempt=5, prior=prior)}
    assert outcomes["a"]["status"] == "succeeded"  # ended in an earlier attempt: kept
    assert outcomes["b"]["status"] == "in_doubt"  # marked dispatched, no end: it may have been sent
    never = (outcomes["c"]["status"], outcomes["c"]["kind"])
    assert never == ("failed", FailureKind.NOT_SENT.value)  # never marked: never sent (a resume calls it)
    assert "the trio thread is not running" in outcomes["c"]["error"]


def test_a_last_attempt_that_never_began_after_no_heartbeat_sent_nothing(tmp_path: Path) -> None:
    outcomes = _gone_thread_batch(tmp_path, attempt=5, prior=None)
    assert [(o["status"], o["kind"]) for o in outcomes] == [("failed", FailureKind.NOT_SENT.value)] * 3


def test_an_earlier_attempt_that_never_began_is_left_to_temporal_to_retry(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="the trio thread is not running"):
        _gone_thread_batch(tmp_path, attempt=1, prior=None)


def test_a_worker_whose_thread_ends_stops_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.errors import McpRunError
    from runner.temporal import worker as worker_module

    thread = TrioThread()
    thread.start()
    served: list[str] = []

    class Worker:  # the SDK's worker, as serve() uses it
        async def __aenter__(self) -> None:
            served.append("started")

        async def __aexit__(self, *exc: object) -> None:
            served.append("shut down")

    async def connect(address: str) -> object:
        return object()

    async def fail() -> None:
        raise OSError("a session's task failed")

    monkeypatch.setattr(worker_module, "connect", connect)
    monkeypatch.setattr(worker_module, "start_worker", lambda *a, **k: (Worker(), thread))

    def ready() -> None:
        cast(Any, thread)._token.run_sync_soon(thread.nursery.start_soon, fail)

    with pytest.raises(McpRunError, match=r"session thread ended \(OSError: a session's task failed\)"):
        asyncio.run(asyncio.wait_for(worker_module.serve("127.0.0.1:1", "q", ready=ready), 10))
    assert served == ["started", "shut down"]
