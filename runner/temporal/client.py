"""``mcp-run FILE --engine temporal``: validate here, start workflow ``mcp-run/<run_id>``, follow it.

The workflow is validated locally as for a local run (the same errors, exit 2); secret inputs are refused
(their values would enter Temporal's history). The run is started with its text, public inputs, step
fingerprints and the names of the environment variables it reads (never their values). The workflow id's
uniqueness replaces the local workflow lock.

Following it: the run's events come from the workflow's ``events`` query, folded into a
:class:`~runner.engine.state.RunState` as a journal is; when it ends, its outcome is settled from that state
(:func:`runner.engine.outcome.settle`) and reported as a local run's is, with the same exit codes; 4 when
Temporal cannot be reached. ``detach``: return once started. Ctrl-C detaches: the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError

from runner.engine.events import RunStatus, decode
from runner.engine.outcome import Outcome, settle
from runner.engine.runctl import fingerprints, workflow_hash
from runner.engine.rundir import new_run_id
from runner.engine.state import RunState
from runner.errors import McpRunError, UsageError
from runner.exitcodes import ExitCode
from runner.temporal.dag import WORKFLOW_NAME, DagWorkflow
from runner.temporal.runtime import runtime
from runner.temporal.spec import RunSpec, build_plan_of
from runner.workflow.plan import Plan

__all__ = [
    "DEFAULT_ADDRESS",
    "TemporalUnreachable",
    "connect",
    "decide",
    "follow",
    "start_run",
    "waits_for_decision",
    "workflow_id",
]

DEFAULT_ADDRESS: Final = "127.0.0.1:7233"
POLL: Final = 0.5  # seconds between two queries for new events


class TemporalUnreachable(McpRunError):
    """Temporal's frontend could not be reached (exit 4)."""

    exit_code = ExitCode.UNREACHABLE


class RunEndedWithoutResult(McpRunError):
    """The run's workflow was cancelled or terminated (exit 1)."""

    exit_code = ExitCode.FAILED


def workflow_id(run_id: str) -> str:
    return f"mcp-run/{run_id}"


async def connect(address: str, namespace: str = "default") -> Client:
    try:
        return await Client.connect(address, namespace=namespace, runtime=runtime())
    except Exception as exc:  # the SDK raises a RuntimeError carrying the gRPC reason
        raise TemporalUnreachable(f"cannot reach Temporal at {address}: {exc}") from None


def make_spec(path: Path, plan: Plan) -> RunSpec:
    """The run's definition, from a validated plan (``UsageError`` for secret inputs)."""
    inputs = dict(plan.input_values or {})
    secret = [name for name, spec in plan.workflow.inputs.items() if spec.secret and name in inputs]
    if secret:
        raise UsageError(
            f"input {secret[0]!r} is secret: --engine temporal does not take secret inputs yet (their values "
            "would be kept in Temporal's history); pass it through an environment variable"
        )
    return RunSpec(
        run_id=new_run_id(),
        workflow=str(path.resolve()),
        text=path.read_text(encoding="utf-8"),
        inputs=inputs,
        env={name: os.environ.get(name) is not None for name in sorted(plan.env_names)},
        fingerprints=fingerprints(plan, inputs),
        workflow_hash=workflow_hash(path),
    )


async def start_run(client: Client, spec: RunSpec, task_queue: str) -> WorkflowHandle[Any, Any]:
    try:
        return await client.start_workflow(
            WORKFLOW_NAME,
            spec.to_json(),
            id=workflow_id(spec.run_id),
            task_queue=task_queue,
            memo={"workflow": spec.workflow},  # what `FILE --resume` looks for among the open runs
        )
    except RPCError as exc:
        raise TemporalUnreachable(f"cannot start the run on Temporal: {exc}") from None


@dataclass
class Followed:
    """What following a run saw: its events folded, and the workflow's result."""

    state: RunState
    result: dict[str, Any]


def waits_for_decision(state: RunState) -> bool:
    """The run stopped with items in doubt: its workflow waits for a decision (``resume``)."""
    return state.ended_by == "run_stopped" and state.status is RunStatus.IN_DOUBT


async def follow(
    handle: WorkflowHandle[Any, Any], *, on_entry: Callable[[Any], None] | None = None, poll: float = POLL
) -> Followed:
    """Fold the run's events as they come, until it ends or waits for a decision about items in doubt."""
    state = RunState(keep_results=set())
    seen = 0

    async def catch_up() -> None:
        nonlocal seen
        while True:
            batch: list[dict[str, Any]] = await handle.query(DagWorkflow.events, seen)
            for obj in batch:
                entry = decode(obj)
                state.apply(entry)
                if on_entry is not None:
                    on_entry(entry)
            seen += len(batch)
            if not batch:
                return

    result_task = asyncio.ensure_future(handle.result())
    try:
        while not result_task.done():
            with contextlib.suppress(RPCError, WorkflowQueryFailedError):
                await catch_up()  # failing while no worker serves the run yet: the events come later
            if waits_for_decision(state):
                stopped = {"run_id": state.run_id, "outputs": state.outputs or {}, "exit_code": state.exit_code}
                return Followed(state, stopped)
            await asyncio.wait([result_task], timeout=poll)
        try:
            result: dict[str, Any] = result_task.result()
        except WorkflowFailureError as exc:  # cancelled, terminated, or timed out
            raise RunEndedWithoutResult(f"the run ended on Temporal without a result: {exc.cause or exc}") from None
        with contextlib.suppress(RPCError, WorkflowQueryFailedError):
            await catch_up()
    finally:
        result_task.cancel()
    return Followed(state, result)


def outcome_of(plan: Plan, followed: Followed) -> Outcome:
    """The run's outcome as a local run reports it: settled from the events folded."""
    outcome = settle(plan, followed.state, outputs=followed.result.get("outputs") or {})
    outcome.plan = plan
    outcome.run_id = followed.result.get("run_id")
    if int(outcome.exit_code) != int(followed.result.get("exit_code", outcome.exit_code)):
        outcome.exit_code = ExitCode(int(followed.result["exit_code"]))  # the workflow's word is final
    return outcome


async def decide(client: Client, run_id: str, choice: str) -> tuple[WorkflowHandle[Any, Any], Plan, int]:
    """Send the decision about run ``run_id``'s items in doubt (``rerun`` or ``skip``). Returns its handle, its
    plan, and the number of the first event of the attempt the decision starts. ``UsageError`` when there
    is no such run, or it waits for no decision."""
    handle = client.get_workflow_handle(workflow_id(run_id))
    try:
        definition: dict[str, Any] = await handle.query(DagWorkflow.definition)
    except (RPCError, WorkflowQueryFailedError) as exc:
        raise UsageError(f"no run {run_id} on Temporal that a worker can answer for: {exc}") from None
    plan = build_plan_of(RunSpec.from_json(definition))
    try:
        start: int = await handle.execute_update(DagWorkflow.decide, choice)
    except WorkflowUpdateFailedError as exc:
        raise UsageError(f"run {run_id}: {exc.cause or exc}") from None
    except RPCError as exc:
        raise UsageError(f"run {run_id}: {exc}") from None
    return handle, plan, start


async def cancel(client: Client, run_id: str) -> None:
    """Ask Temporal to cancel run ``run_id`` (``UsageError`` when there is no such run)."""
    try:
        await client.get_workflow_handle(workflow_id(run_id)).cancel()
    except RPCError as exc:
        raise UsageError(f"cannot cancel run {run_id} on Temporal: {exc}") from None


async def events_of(client: Client, run_id: str, *, start: int = 0) -> list[dict[str, Any]]:
    """Every event of run ``run_id`` (after the first ``start``), as journal objects (a worker answers the
    query)."""
    handle = client.get_workflow_handle(workflow_id(run_id))
    out: list[dict[str, Any]] = []
    while True:
        try:
            batch: list[dict[str, Any]] = await handle.query(DagWorkflow.events, start + len(out))
        except (RPCError, WorkflowQueryFailedError) as exc:
            raise UsageError(
                f"cannot read run {run_id} on Temporal (a worker of its task queue answers): {exc}"
            ) from None
        if not batch:
            return out
        out.extend(batch)


async def open_runs(client: Client, workflow: str) -> list[str]:
    """The ids of the open runs of the workflow file at absolute path ``workflow``, oldest first."""
    out: list[str] = []
    query = f'WorkflowType="{WORKFLOW_NAME}" AND ExecutionStatus="Running"'
    try:
        async for execution in client.list_workflows(query):
            memo = await execution.memo()
            if memo.get("workflow") == workflow and execution.id.startswith("mcp-run/"):
                out.append(execution.id.removeprefix("mcp-run/"))
    except RPCError as exc:
        raise TemporalUnreachable(f"cannot list the runs on Temporal: {exc}") from None
    return sorted(out)
