"""``mcp-run FILE --engine temporal``: validate here, start the file's workflow ``mcp-run/<key>``, follow it.

The workflow is validated locally as for a local run (the same errors, exit 2); secret inputs are refused
(their values would enter Temporal's history). The run is started with its text, public inputs, step
fingerprints and the names of the environment variables it reads (never their values). The workflow id is
the file's (:mod:`runner.temporal.runids`): Temporal refuses a second open run of the same file, which
replaces the local workflow lock (:class:`RunAlreadyOpen`).

Following it: the run's events come from the workflow's ``events`` query, folded into a
:class:`~runner.engine.core.state.RunState` as a journal is; when it ends, its outcome is settled from that state
(:func:`runner.engine.core.outcome.settle`) and reported as a local run's is, with the same exit codes; 4 when
Temporal cannot be reached. ``detach``: return once started. Ctrl-C detaches: the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from runner.engine.core.events import decode
from runner.engine.core.outcome import Outcome, settle
from runner.engine.core.state import RunState
from runner.engine.core.vocabulary import RunStatus
from runner.engines import DEFAULT_ADDRESS
from runner.errors import RunAlreadyOpen, RunEndedWithoutResult, TemporalUnreachable, UsageError
from runner.exitcodes import ExitCode
from runner.masking import shown_fields
from runner.temporal.changes import memo_of
from runner.temporal.runids import (
    Located,
    describe,
    file_workflow_id,
    locate,
    new_temporal_run_id,
    workflow_id_of_run,
)
from runner.temporal.runtime import runtime
from runner.temporal.spec import QUERY_LIMIT, WORKFLOW_NAME, RunSpec, build_plan_of
from runner.workflow.fingerprints import fingerprints, workflow_hash
from runner.workflow.plan import OutputFailure, Plan

__all__ = [
    "DEFAULT_ADDRESS",
    "RunAlreadyOpen",
    "RunEndedWithoutResult",
    "TemporalUnreachable",
    "connect",
    "decide",
    "follow",
    "open_run",
    "start_run",
    "waits_for_decision",
    "workflow_id",
]

POLL: Final = 0.5  # seconds between two queries for new events
PATIENCE: Final = 120.0  # seconds Temporal may stay unreachable, beyond the SDK's own retries, while a run is followed


def workflow_id(run_id: str) -> str:
    """The workflow id of run ``run_id``."""
    return workflow_id_of_run(run_id)


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
        run_id=new_temporal_run_id(path.resolve()),
        workflow=str(path.resolve()),
        text=path.read_text(encoding="utf-8"),
        inputs=inputs,
        env={name: os.environ.get(name) is not None for name in sorted(plan.env_names)},
        fingerprints=fingerprints(plan, inputs),
        workflow_hash=workflow_hash(path),
    )


async def start_run(client: Client, spec: RunSpec, task_queue: str) -> WorkflowHandle[Any, Any]:
    """Start run ``spec`` under its file's workflow id; its handle, pinned to the run. :class:`RunAlreadyOpen`
    when a run of the file is open: Temporal refuses the start (``id_conflict_policy=FAIL``), so of two
    starts racing each other exactly one goes through."""
    wid = file_workflow_id(spec.workflow)
    try:
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            spec.to_json(),
            id=wid,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,  # never two open runs of one file
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,  # a closed run does not block the next
            memo=memo_of(spec),  # how any command finds the run, and what a resume compares
        )
    except WorkflowAlreadyStartedError as exc:
        found = await describe(client, wid, exc.run_id) if exc.run_id else None
        waiting = await waits(found.handle) if found is not None else None
        raise RunAlreadyOpen(found.run_id if found is not None else None, spec.workflow, waiting=waiting) from None
    except RPCError as exc:
        raise TemporalUnreachable(f"cannot start the run on Temporal: {exc}") from None
    return client.get_workflow_handle(wid, run_id=handle.result_run_id)


async def waits(handle: WorkflowHandle[Any, Any], timeout: float = 3.0) -> bool | None:
    """Whether the run waits for a decision about items in doubt; None when no worker answers in time."""
    try:
        answer = await handle.query("waiting", rpc_timeout=timedelta(seconds=timeout))
    except (RPCError, WorkflowQueryFailedError):
        return None
    return bool(answer)


async def open_run(client: Client, workflow: str) -> Located | None:
    """The open run of the workflow file at absolute path ``workflow``, if any (read from Temporal's record of
    the file's workflow id, not from its lagging list)."""
    newest = await describe(client, file_workflow_id(workflow))
    return newest if newest is not None and newest.open else None


@dataclass
class Followed:
    """What following a run saw: its events folded, and the workflow's result."""

    state: RunState
    result: dict[str, Any]


def waits_for_decision(state: RunState) -> bool:
    """The run stopped with items in doubt: its workflow waits for a decision (``resume``)."""
    return state.ended_by == "run_stopped" and state.status is RunStatus.IN_DOUBT


async def follow(
    handle: WorkflowHandle[Any, Any],
    *,
    on_entry: Callable[[Any], None] | None = None,
    poll: float = POLL,
    patience: float = PATIENCE,
) -> Followed:
    """Fold the run's events as they come, until it ends or waits for a decision about items in doubt.

    Temporal away (a dev server restarting on a loaded machine takes longer than the SDK's retries, ~10 s):
    the result is asked again, until Temporal has been unreachable for ``patience`` seconds on end (then
    :class:`TemporalUnreachable`: the run goes on there; following it again picks it up)."""
    state = RunState(keep_results=set())
    seen = 0
    loop = asyncio.get_running_loop()
    down_since: float | None = None  # when the result's wait last failed for want of Temporal

    async def catch_up() -> None:
        nonlocal seen, down_since
        while True:
            batch: list[dict[str, Any]] = await handle.query("events", seen)
            down_since = None  # it answered
            for obj in batch:
                entry = decode(shown_fields(obj))  # the events hold encoded text: shown as a person reads it
                state.apply(entry)
                if on_entry is not None:
                    on_entry(entry)
            seen += len(batch)
            if len(batch) < QUERY_LIMIT:  # all there is for now: no query more (on a closed run, each is a replay)
                return

    while True:
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
            except RPCError as exc:  # away longer than the SDK retries
                now = loop.time()
                down_since = now if down_since is None else down_since
                if now - down_since < patience:
                    await asyncio.sleep(poll)
                    continue  # ask again: the run goes on there, and its events are kept for us
                raise TemporalUnreachable(f"lost Temporal while following the run (it goes on there): {exc}") from None
            with contextlib.suppress(RPCError, WorkflowQueryFailedError):
                await catch_up()
            break
        finally:
            result_task.cancel()
    return Followed(state, result)


def outcome_of(plan: Plan, followed: Followed) -> Outcome:
    """The run's outcome as a local run reports it: settled from the events folded."""
    failures = [OutputFailure(**failure) for failure in followed.result.get("output_failures") or ()]
    outcome = settle(plan, followed.state, outputs=followed.result.get("outputs") or {}, output_failures=failures)
    outcome.plan = plan
    outcome.run_id = followed.result.get("run_id")
    if int(outcome.exit_code) != int(followed.result.get("exit_code", outcome.exit_code)):
        outcome.exit_code = ExitCode(int(followed.result["exit_code"]))  # the workflow's word is final
    return outcome


async def decide(client: Client, run_id: str, choice: str) -> tuple[WorkflowHandle[Any, Any], Plan, int]:
    """Send the decision about run ``run_id``'s items in doubt (``rerun`` or ``skip``). Returns its handle, its
    plan, and the number of the first event of the attempt the decision starts. ``UsageError`` when there
    is no such run, or it waits for no decision."""
    located = await locate(client, run_id)  # a short id names its run: the full one from here on
    handle, run_id = located.handle, located.run_id
    try:
        definition: dict[str, Any] = await handle.query("definition")
    except (RPCError, WorkflowQueryFailedError) as exc:
        raise UsageError(f"no run {run_id} on Temporal that a worker can answer for: {exc}") from None
    plan = build_plan_of(RunSpec.from_json(definition))
    try:
        start: int = await handle.execute_update("decide", choice)
    except WorkflowUpdateFailedError as exc:
        raise UsageError(f"run {run_id}: {exc.cause or exc}") from None
    except RPCError as exc:
        raise UsageError(f"run {run_id}: {exc}") from None
    return handle, plan, start


async def cancel(client: Client, run_id: str) -> None:
    """Ask Temporal to cancel run ``run_id`` (``UsageError`` when there is no such run, or it is closed)."""
    run = await locate(client, run_id)
    if not run.open:  # Temporal takes a cancel of a closed run without a word: say it here
        status = run.description.status.name.lower() if run.description.status is not None else "closed"
        raise UsageError(f"run {run_id} is closed on Temporal ({status}): there is nothing to cancel")
    try:
        await run.handle.cancel()
    except RPCError as exc:
        raise UsageError(f"cannot cancel run {run_id} on Temporal: {exc}") from None


async def events_of(client: Client, run_id: str, *, start: int = 0) -> list[dict[str, Any]]:
    """Every event of run ``run_id`` (after the first ``start``), as journal objects (a worker answers the
    query)."""
    return await events_of_handle((await locate(client, run_id)).handle, run_id, start=start)


async def events_of_handle(handle: WorkflowHandle[Any, Any], run_id: str, *, start: int = 0) -> list[dict[str, Any]]:
    """:func:`events_of` for a run already located."""
    out: list[dict[str, Any]] = []
    while True:
        try:
            batch: list[dict[str, Any]] = await handle.query("events", start + len(out))
        except (RPCError, WorkflowQueryFailedError) as exc:
            raise UsageError(
                f"cannot read run {run_id} on Temporal (a worker of its task queue answers): {exc}"
            ) from None
        out.extend(batch)
        if len(batch) < QUERY_LIMIT:  # all there is (see follow)
            return out
