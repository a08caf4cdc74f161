"""The runs on Temporal, as ``mcp-run runs --engine temporal`` lists them: the ``mcp-run/*`` workflow runs of
Temporal's list API (one workflow id per file, one entry per run), with their status. A closed run's status
and counts are its workflow's result (read from its history; no worker needed); an open run is ``running``
(or waits for a decision: ``show`` says)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from runner.temporal.runids import PREFIX, TemporalUnreachable, locate
from runner.temporal.spec import WORKFLOW_NAME

__all__ = ["RemoteRun", "list_runs"]

_CLOSED_WITHOUT_RESULT = {
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed-out",
    WorkflowExecutionStatus.FAILED: "failed",
}


@dataclass
class RemoteRun:
    """One run on Temporal: its id, workflow file (the memo), status, exit code, times and item counts (None
    while the run is open: its events say, through ``show``)."""

    run_id: str
    workflow: str | None
    status: str
    exit_code: int | None = None
    started: datetime | None = None
    finished: datetime | None = None
    counts: dict[str, int] | None = field(default=None)


async def list_runs(client: Client, limit: int | None = None) -> list[RemoteRun]:
    """The runs of the namespace, oldest first (the newest ``limit`` when given)."""
    query = f'WorkflowType="{WORKFLOW_NAME}"'
    found: list[Any] = []
    try:
        async for execution in client.list_workflows(query):
            if execution.id.startswith(PREFIX):
                found.append(execution)
    except RPCError as exc:
        raise TemporalUnreachable(f"cannot list the runs on Temporal: {exc}") from None
    found.sort(key=lambda e: (e.start_time, e.id))
    if limit is not None:
        found = found[-limit:] if limit > 0 else []
    return [await _run_of(client, execution) for execution in found]


async def _run_of(client: Client, execution: Any) -> RemoteRun:
    memo = await execution.memo()
    run = RemoteRun(
        run_id=memo["run_id"] if isinstance(memo.get("run_id"), str) else execution.id.removeprefix(PREFIX),
        workflow=memo.get("workflow") if isinstance(memo.get("workflow"), str) else None,
        status="running",
        started=execution.start_time,
        finished=execution.close_time,
    )
    status = execution.status
    if status is WorkflowExecutionStatus.COMPLETED:
        await _completed(client, execution, run)
    elif status in _CLOSED_WITHOUT_RESULT:
        run.status = _CLOSED_WITHOUT_RESULT[status]
    elif status is not WorkflowExecutionStatus.RUNNING and status is not None:
        run.status = status.name.lower().replace("_", "-")
    return run


async def _completed(client: Client, execution: Any, run: RemoteRun) -> None:
    """A completed run's status, exit code and counts, from its workflow's result (``completed`` when there
    is none to read)."""
    try:
        result = await client.get_workflow_handle(execution.id, run_id=execution.run_id).result()
    except (RPCError, WorkflowFailureError):
        result = None
    if isinstance(result, dict):
        run.status = str(result.get("status") or "completed")
        run.exit_code = result.get("exit_code")
        counts = result.get("counts")
        run.counts = {**counts, "running": 0} if isinstance(counts, dict) else None
    else:
        run.status = "completed"


async def is_open(client: Client, run_id: str) -> bool:
    """Whether run ``run_id``'s workflow is still open (``UsageError`` when there is no such run)."""
    return (await locate(client, run_id)).open


async def events_after(client: Client, run_id: str, seen: int) -> list[dict[str, Any]]:
    """The events of run ``run_id`` after the first ``seen``, as journal objects (a worker answers)."""
    from runner.temporal.client import events_of

    return await events_of(client, run_id, start=seen)
