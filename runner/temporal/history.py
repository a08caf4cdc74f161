"""A Temporal run's events read from its workflow history, with no worker running: ``show``, ``logs`` and
``export`` of a run whose workers are all gone.

The history holds every input the run's workflow ever received: its definition, each activity's result (or
failure, with the last heartbeat's markers), the progress signals and the decisions (Updates). The workflow
is deterministic, so replaying that history through the workflow's own code here (Temporal's ``Replayer``)
rebuilds exactly the events a worker would answer the ``events`` query with; nothing re-derives them.

The events are taken as they stood after the last activation of the history, before the replayer evicts the
workflow (eviction cancels its tasks, and code run then must not count). A history this code cannot replay
(a worker of another mcp-run version ran it: non-determinism) falls back to the query, which a worker
answers.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    Replayer,
    UnsandboxedWorkflowRunner,
    WorkflowInboundInterceptor,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowInterceptorClassInput,
)

from runner.errors import UsageError
from runner.temporal.client import TemporalUnreachable, events_of_handle
from runner.temporal.dag import DagWorkflow
from runner.temporal.runids import Located, locate

__all__ = ["HistoryFollower", "ReplayFailed", "events_from_history", "located_events", "run_events"]


class ReplayFailed(Exception):
    """The history could not be replayed by this code (another version of the workflow ran it)."""


async def run_events(client: Client, run_id: str, *, start: int = 0) -> list[dict[str, Any]]:
    """Run ``run_id``'s events after the first ``start``, as journal objects: from its history; from a worker's
    answer when this code cannot replay the history. ``UsageError`` when there is no such run."""
    return await located_events(client, await locate(client, run_id), start=start)


async def located_events(client: Client, run: Located, *, start: int = 0) -> list[dict[str, Any]]:
    """:func:`run_events` of a run already located (its handle pinned to its Temporal run)."""
    try:
        return (await _replay(client, run))[start:]
    except ReplayFailed:
        return await events_of_handle(run.handle, run.run_id, start=start)


async def events_from_history(client: Client, run_id: str) -> list[dict[str, Any]]:
    """Every event of run ``run_id``, rebuilt by replaying its workflow history (no worker needed)."""
    return await _replay(client, await locate(client, run_id))


async def _replay(client: Client, run: Located) -> list[dict[str, Any]]:
    try:
        history = await run.handle.fetch_history()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise UsageError(f"no run {run.run_id} on Temporal") from None
        raise TemporalUnreachable(f"cannot read run {run.run_id}'s history on Temporal: {exc}") from None
    recorder = _Recorder()
    replayer = Replayer(
        workflows=[DagWorkflow],
        data_converter=client.data_converter,
        interceptors=[recorder.interceptor()],
        unsandboxed_workflow_runner=_RecordingRunner(recorder),
        runtime=client.service_client.config.runtime,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None or recorder.dag is None:
        raise ReplayFailed(str(result.replay_failure or "the run's workflow never started"))
    return recorder.events()


class _Recorder:
    """The replayed workflow object, and how many events it had after the last activation before eviction."""

    def __init__(self) -> None:
        self.dag: DagWorkflow | None = None
        self.settled = 0

    def interceptor(self) -> Interceptor:
        recorder = self

        class Inbound(WorkflowInboundInterceptor):
            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                instance = workflow.instance()
                if isinstance(instance, DagWorkflow):
                    recorder.dag = instance
                return await super().execute_workflow(input)

        class Capture(Interceptor):
            def workflow_interceptor_class(
                self, input: WorkflowInterceptorClassInput
            ) -> type[WorkflowInboundInterceptor] | None:
                return Inbound

        return Capture()

    def activated(self, act: WorkflowActivation) -> None:
        if self.dag is not None and not any(job.HasField("remove_from_cache") for job in act.jobs):
            self.settled = _count(self.dag, self.settled)

    def events(self) -> list[dict[str, Any]]:
        assert self.dag is not None
        out: list[dict[str, Any]] = []
        while len(out) < self.settled:
            batch = self.dag.events(len(out))  # the query's own code, called directly
            if not batch:
                break
            out.extend(batch)
        return out[: self.settled]


def _count(dag: DagWorkflow, known: int) -> int:
    """How many events ``dag`` has journaled, ``known`` of them already counted (the query answers in pages)."""
    n = known
    while batch := dag.events(n):
        n += len(batch)
    return n


class _RecordingRunner(UnsandboxedWorkflowRunner):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self._recorder = recorder

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _RecordingInstance(super().create_instance(det), self._recorder)


class _RecordingInstance(WorkflowInstance):
    """The workflow instance, noting the events after each activation."""

    def __init__(self, inner: WorkflowInstance, recorder: _Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self._inner.activate(act)
        self._recorder.activated(act)
        return completion

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.get_external_store_context(*args, **kwargs)

    def get_info(self) -> workflow.Info:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()


class HistoryFollower:
    """The events of a located run as it goes (``logs --follow``): the history is replayed again only when it
    grew, so polling an idle run costs one ``describe``, not a replay."""

    def __init__(self, client: Client, run: Located) -> None:
        self._client = client
        self._run = run
        self._length = -1

    async def events(self, *, start: int = 0) -> list[dict[str, Any]]:
        """The events after the first ``start``; none when the history has not grown since the last call."""
        await self._run.still_open()  # reads the description again
        length = self._run.description.raw_description.workflow_execution_info.history_length
        if length == self._length:
            return []
        events = await located_events(self._client, self._run, start=start)
        self._length = length
        return events
