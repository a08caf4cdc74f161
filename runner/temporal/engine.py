"""The Temporal engine (:class:`runner.engines.Engine`): a run started on Temporal's workers (or the file's open
run found, with ``resume``) and followed from here to its :class:`~runner.engine.core.outcome.Outcome`.

The lifecycle, in two halves so that a caller may stop after the first (``mcp-run FILE --engine temporal
--detach``): :meth:`TemporalEngine.start` validates the workflow here (the errors of a local run, exit 2),
starts its run, or, with ``resume``, finds the file's open run, checks it was started from the same definition
and sends it the decision about its items in doubt; :meth:`TemporalEngine.follow` folds the run's events until
it ends (or waits for a decision) and settles its outcome as a local run's (:mod:`runner.temporal.client`).
:meth:`TemporalEngine.resume` sends a decision to a run named by its id. The client is asyncio's; ``run``
starts and stops an asyncio loop, ``arun`` does that in a worker thread of a trio program.

Refusals are typed (:mod:`runner.errors`): :class:`~runner.errors.RunAlreadyOpen` when a run of the file is
open and ``resume`` was not asked, :class:`~runner.errors.OpenRunChanged` when the open run's definition is
not the file's, :class:`~runner.errors.TemporalUnreachable` (exit 4); the CLI adds the commands to paste.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.client import Client, WorkflowHandle

from runner.engine.core.outcome import Outcome
from runner.engine.options import RunOptions
from runner.engine.telemetry import from_env as tracing_from_env
from runner.engines import EngineName, RunRequest, TemporalOptions, refuse_unsupported
from runner.errors import OpenRunChanged, RunAlreadyOpen, UsageError
from runner.temporal import client as remote
from runner.temporal.changes import changes_since
from runner.temporal.spec import RunSpec
from runner.temporal.tracing import traced_client
from runner.workflow.loader import load_inputs_file, validate
from runner.workflow.plan import Plan

if TYPE_CHECKING:
    from runner.engine.telemetry.otel import Tracing

__all__ = ["Started", "TemporalEngine"]


@dataclass
class Started:
    """A run on Temporal to follow: its handle, id and plan; ``after``: the number of its events that came
    before this attempt (a decision's attempt starts past them); ``found``: it was open already; ``tracing``: the
    run's spans, when it was started here traced (:mod:`runner.temporal.tracing`)."""

    handle: WorkflowHandle[Any, Any]
    run_id: str
    plan: Plan
    after: int = 0
    found: bool = False
    tracing: Tracing | None = None


class _Quiet:
    """The reporter of a caller that gave none: a program's run prints nothing."""

    def info(self, text: str) -> None:
        pass

    def warn(self, text: str) -> None:
        pass

    def error(self, text: str) -> None:
        pass


class TemporalEngine:
    """Runs on Temporal's workers (``mcp-run worker``), configured by :class:`~runner.engines.TemporalOptions`.
    ``tracing``: the spans of the runs it starts (default: as the ``OTEL_*`` variables say, none without them;
    a run found open, or resumed by a decision, is followed untraced)."""

    name: EngineName = "temporal"

    def __init__(self, options: TemporalOptions, *, tracing: Tracing | None = None) -> None:
        self.options = options
        self.tracing = tracing

    def run(self, request: RunRequest) -> Outcome:
        """Start (or find, with ``resume``) the run and follow it to its end; an asyncio loop of its own."""
        return asyncio.run(self.start_and_follow(request))

    async def arun(self, request: RunRequest) -> Outcome:
        """:meth:`run` inside a trio program: the asyncio loop runs in a worker thread, which trio cannot cancel (a
        cancelled scope waits for the run to end or stop; the run itself goes on on Temporal either way)."""
        import trio

        return await trio.to_thread.run_sync(self.run, request)

    async def start_and_follow(self, request: RunRequest) -> Outcome:
        return await self.follow(await self.start(request))

    async def connect(self) -> Client:
        return await remote.connect(self.options.address)

    async def start(self, request: RunRequest, *, client: Client | None = None) -> Started:
        """The run to follow (see the module docstring); says which on ``request.reporter``."""
        if request.watcher is not None:
            raise UsageError("a watcher draws a local run (its view runs in trio): the Temporal engine takes none")
        options = request.options
        refuse_unsupported(options)
        say = request.reporter if request.reporter is not None else _Quiet()
        plan = _load_plan(request.path, options)
        spec = replace(
            remote.make_spec(request.path, plan),
            batch_size=self.options.batch_size or 0,  # 0: the workflow sizes each fan-out's batches
            heartbeat_timeout=self.options.heartbeat_timeout,
            server_log_level=options.server_log_level,  # carried to the workers (runner.temporal.serverlog)
        )
        client = client if client is not None else await self.connect()
        horizon = max((ps.cache for ps in plan.steps.values() if ps.cache is not None), default=None)
        if horizon is not None and not options.no_cache:  # (read once, here: the workflow itself reads nothing)
            from runner.temporal.cache import earlier_results  # (loads the SDK's worker, to replay histories)

            now = options.clock()
            cache = await earlier_results(client, spec.workflow, now=now, horizon=horizon)
            spec = replace(spec, cache=cache, cache_now=now)
        tracing = self.tracing
        if tracing is None:
            tracing = tracing_from_env(os.environ, warn=say.warn, remote_items=True)
        name = plan.workflow.name or request.path.stem
        handle, found = await self._open_handle(client, spec, resume=options.resume, tracing=(tracing, name))
        if found is None:
            say.info(f"run {spec.run_id} on Temporal (workflow {handle.id}, task queue {self.options.task_queue})")
            return Started(handle, spec.run_id, plan, tracing=tracing)
        changes = changes_since(await found.description.memo(), spec)
        if changes:
            raise OpenRunChanged(found.run_id, str(request.path), changes)
        after = 0
        if options.in_doubt != "ask":
            handle, _plan, after = await remote.decide(client, found.run_id, options.in_doubt)
        elif any(ps.reconcile is not None for ps in plan.steps.values()) and await remote.waits(found.handle):
            # No decision: a run waiting on items in doubt of steps with reconcile: asks their reconcile tools.
            handle, _plan, after = await remote.decide(client, found.run_id, "reconcile")
        say.info(f"following run {found.run_id} on Temporal (workflow {handle.id})")
        return Started(handle, found.run_id, plan, after=after, found=True)

    async def _open_handle(
        self, client: Client, spec: RunSpec, *, resume: bool, tracing: tuple[Tracing | None, str] = (None, "")
    ) -> tuple[Any, Any]:
        """The handle of the run to follow, and the open run found (None when it was started here). With
        ``resume``: the file's open run, else a new one; without: a new one, refused by Temporal when a run is
        open (:class:`~runner.errors.RunAlreadyOpen`). ``tracing``: the run's spans and its name; a run
        started here is started under its run span."""
        for _ in range(self.options.open_attempts):  # an open run found may close before it is followed
            found = await remote.open_run(client, spec.workflow) if resume else None
            if found is not None:
                return found.handle, found
            try:
                return await self._start_run(client, spec, *tracing), None
            except RunAlreadyOpen as exc:
                if tracing[0] is not None:
                    tracing[0].end(exc)  # the span of a start Temporal refused
                if not resume:
                    raise
        raise UsageError(f"the runs of {spec.workflow} on Temporal change too fast to follow one; try again")

    async def _start_run(self, client: Client, spec: RunSpec, tracing: Tracing | None, name: str) -> Any:
        if tracing is None:
            return await remote.start_run(client, spec, self.options.task_queue)
        spec = replace(spec, traceparent=tracing.begin(name, run_id=spec.run_id, attempt=1))  # journaled, as locally
        with tracing.in_run():
            handle = await remote.start_run(traced_client(client, tracing), spec, self.options.task_queue)
        return client.get_workflow_handle(handle.id, run_id=handle.run_id)  # followed untraced: no span per query

    async def resume(self, run_id: str, decision: str, *, client: Client | None = None) -> Started:
        """Send run ``run_id`` the decision about its items in doubt (``rerun``, ``skip`` or ``accept``); the
        attempt it starts, to follow."""
        client = client if client is not None else await self.connect()
        handle, plan, after = await remote.decide(client, run_id, decision)
        return Started(handle, run_id, plan, after=after, found=True)

    async def follow(self, started: Started, *, on_entry: Callable[[Any], None] | None = None) -> Outcome:
        """Follow ``started`` until it ends or waits for a decision; its outcome, timed from here."""
        began = time.monotonic()
        tracing = started.tracing
        observe = on_entry if tracing is None else _both(tracing.observe, on_entry)
        try:
            followed = await remote.follow(started.handle, on_entry=observe)
        except BaseException as exc:
            if tracing is not None:
                tracing.end(exc)
            raise
        finally:
            if tracing is not None:
                tracing.end()
                await asyncio.to_thread(tracing.shutdown)  # what is buffered (bounded by the exporter's timeout)
        outcome = remote.outcome_of(started.plan, followed)
        outcome.duration = time.monotonic() - began
        return outcome


def _both(first: Callable[[Any], None], then: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """An observer of the followed events calling ``first``, then ``then`` (when given)."""

    def observe(entry: Any) -> None:
        first(entry)
        if then is not None:
            then(entry)

    return observe


def _load_plan(path: Path, options: RunOptions) -> Plan:
    """The workflow validated here, with every input (required): values, then a file's, then ``NAME=VALUE``."""
    if not path.is_file():
        raise UsageError(f"no workflow file {str(path)!r}")
    from_file: Mapping[str, Any] = load_inputs_file(options.inputs_file) if options.inputs_file else {}
    merged = {**from_file, **(options.inputs or {})}
    return validate(str(path), require_inputs=True, input_pairs=list(options.input_pairs), inputs_file=merged or None)
