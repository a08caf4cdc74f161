"""Which Temporal workflow a run is: one workflow id per workflow file, and run ids that name it.

**One open run per file, enforced by Temporal.** Every run of a workflow file has the same workflow id,
``mcp-run/<key>``, where ``key`` is the identity the local engine's workflow lock uses
(:func:`runner.engine.journal.rundir.workflow_key`: a hash of the file's absolute path, symlinks resolved). A run
starts with ``id_conflict_policy=FAIL`` (Temporal refuses a second start while a run of that id is open:
:class:`~temporalio.exceptions.WorkflowAlreadyStartedError`) and ``id_reuse_policy=ALLOW_DUPLICATE`` (once a
run is closed, whatever its end, the next one may start). Temporal decides this atomically on its side, so two
starts racing each other give one run, never two; its visibility list, which lags, is never asked.

**Run ids.** A run id is a local one (:func:`~runner.engine.journal.rundir.new_run_id`, sortable by time) followed by
``-<key>``: from it alone, any command finds the workflow id. The newest run of that id is read with
``describe`` (strongly consistent) and matched by the ``run_id`` in its memo; an older, closed run is found in
Temporal's list of that workflow id (a closed run has long been listed). Each is then pinned by its Temporal
run id, so a command never acts on a newer run of the same file by mistake. Run ids of the first design
(``mcp-run/<run_id>`` per run, no key) are still found under their own workflow id.

**Short run ids**, as the local engine takes them (:func:`runner.engine.journal.rundir.find_run`): a run id that names
no run is read as an abbreviation, a unique prefix (``20261129T2135``) or suffix of one, or the random part of
its local id (``3f9a1c``), among the runs of Temporal's list (:func:`expand`): one match is that run; several
are :class:`~runner.engine.journal.rundir.AmbiguousRun`, none :class:`~runner.engine.journal.rundir.UnknownRun`
(exit 2).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from runner.engine.journal.rundir import AmbiguousRun, UnknownRun, new_run_id, workflow_key
from runner.errors import TemporalUnreachable

__all__ = [
    "PREFIX",
    "Located",
    "TemporalUnreachable",
    "abbreviates",
    "expand",
    "file_workflow_id",
    "locate",
    "new_temporal_run_id",
    "workflow_id_of_run",
]

PREFIX: Final = "mcp-run/"
_KEYED = re.compile(r"^(?P<local>.+)-(?P<key>[0-9a-f]{16})$")
LIST_WAIT: Final = 3.0  # seconds to wait for Temporal's list to show an older run (it lags a little)


def file_workflow_id(workflow: str | Path) -> str:
    """The workflow id of every run of the workflow file at ``workflow``."""
    return PREFIX + workflow_key(Path(workflow))


def new_temporal_run_id(workflow: str | Path) -> str:
    """A new run id for a run of ``workflow`` on Temporal: a local run id, then ``-`` and the file's key."""
    return f"{new_run_id()}-{workflow_key(Path(workflow))}"


def workflow_id_of_run(run_id: str) -> str:
    """The workflow id that run ``run_id`` has (or had)."""
    keyed = _KEYED.match(run_id)
    return PREFIX + (keyed["key"] if keyed is not None else run_id)


@dataclass
class Located:
    """A run found on Temporal: its handle pinned to its Temporal run, and its description."""

    run_id: str
    handle: WorkflowHandle[Any, Any]
    description: WorkflowExecutionDescription

    @property
    def open(self) -> bool:
        return self.description.status is WorkflowExecutionStatus.RUNNING

    async def still_open(self) -> bool:
        """Whether the run is open now (its description read again)."""
        try:
            self.description = await self.handle.describe()
        except RPCError as exc:
            raise TemporalUnreachable(f"cannot read run {self.run_id} on Temporal: {exc}") from None
        return self.open


async def memo_run_id(description: Any) -> str | None:
    """The mcp-run run id in a workflow execution's memo (None when it has none)."""
    memo = await description.memo()
    value = memo.get("run_id")
    return value if isinstance(value, str) else None


async def describe(client: Client, workflow_id: str, temporal_run_id: str | None = None) -> Located | None:
    """The run of ``workflow_id`` (the newest, or the Temporal run ``temporal_run_id``); None when there is none."""
    handle = client.get_workflow_handle(workflow_id, run_id=temporal_run_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return None
        raise TemporalUnreachable(f"cannot read workflow {workflow_id} on Temporal: {exc}") from None
    pinned = client.get_workflow_handle(workflow_id, run_id=description.run_id)
    run_id = await memo_run_id(description) or workflow_id.removeprefix(PREFIX)
    return Located(run_id, pinned, description)


async def locate(client: Client, run_id: str, *, list_wait: float = LIST_WAIT) -> Located:
    """Run ``run_id`` on Temporal, pinned: its full id, or an abbreviation of one (:func:`expand`).
    ``UnknownRun`` when there is no such run, ``AmbiguousRun`` when an abbreviation names several."""
    keyed = _KEYED.match(run_id) is not None
    found = await _exact(client, run_id, list_wait=list_wait)
    if found is not None:
        return found
    full = await expand(client, run_id, list_wait=0.0 if keyed else list_wait)  # a keyed id waited already
    found = await _exact(client, full, list_wait=list_wait)
    if found is None:
        raise UnknownRun(f"no run {run_id} on Temporal")
    return found


async def _exact(client: Client, run_id: str, *, list_wait: float) -> Located | None:
    """Run ``run_id`` (a full id), pinned; None when there is no such run."""
    workflow_id = workflow_id_of_run(run_id)
    newest = await describe(client, workflow_id)
    if newest is not None and newest.run_id == run_id:
        return newest
    if newest is not None and _KEYED.match(run_id) is not None:
        return await _listed(client, workflow_id, run_id, list_wait=list_wait)
    return None


async def _listed(client: Client, workflow_id: str, run_id: str, *, list_wait: float) -> Located | None:
    """Run ``run_id`` among the runs of ``workflow_id`` (an older run of a keyed id), listed again for up to
    ``list_wait`` seconds (Temporal's list is eventually consistent); None when it is not found."""
    query = f'WorkflowId = "{workflow_id}"'
    loop = asyncio.get_running_loop()
    deadline = loop.time() + list_wait
    while True:
        found = await _listed_once(client, query, workflow_id, run_id)
        if found is not None:
            return found
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(0.2)


async def _listed_once(client: Client, query: str, workflow_id: str, run_id: str) -> Located | None:
    try:
        async for execution in client.list_workflows(query):
            if await memo_run_id(execution) == run_id:
                found = await describe(client, workflow_id, execution.run_id)
                if found is not None:
                    return found
    except RPCError as exc:
        raise TemporalUnreachable(f"cannot list the runs on Temporal: {exc}") from None
    return None


def abbreviates(ref: str, run_id: str) -> bool:
    """Whether ``ref`` abbreviates ``run_id``, as the local engine reads abbreviations: a prefix or a suffix of
    it, or a suffix of its local part (the random part, without the file's key)."""
    if not ref:
        return False
    keyed = _KEYED.match(run_id)
    local = keyed["local"] if keyed is not None else run_id
    return run_id.startswith(ref) or run_id.endswith(ref) or local.endswith(ref)


async def expand(client: Client, ref: str, *, list_wait: float = LIST_WAIT) -> str:
    """The full id of the one run ``ref`` abbreviates, among the mcp-run runs of Temporal's list (which lags a
    little: a run it does not show yet is waited for up to ``list_wait`` seconds). ``UnknownRun`` naming recent
    runs when none matches, ``AmbiguousRun`` listing the candidates when several do."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + list_wait
    while True:
        known = await _listed_run_ids(client)
        matches = [r for r in known if abbreviates(ref, r)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            listed = "\n  ".join(matches[-20:])
            more = f"\n  ... and {len(matches) - 20} more" if len(matches) > 20 else ""
            say = f"{ref!r} matches {len(matches)} runs on Temporal; say which:\n  {listed}{more}"
            raise AmbiguousRun(say, matches)
        if loop.time() >= deadline:
            hint = f"; known runs: {', '.join(known[-5:])}" if known else ""
            raise UnknownRun(f"no run {ref} on Temporal{hint}")
        await asyncio.sleep(0.2)


async def _listed_run_ids(client: Client) -> list[str]:
    """The run ids of the mcp-run runs in Temporal's list, oldest first (each once)."""
    found: list[tuple[Any, str]] = []
    try:
        async for execution in client.list_workflows('WorkflowType = "mcp-run"'):
            if execution.id.startswith(PREFIX):
                found.append((execution.start_time, await memo_run_id(execution) or execution.id.removeprefix(PREFIX)))
    except RPCError as exc:
        raise TemporalUnreachable(f"cannot list the runs on Temporal: {exc}") from None
    found.sort(key=lambda pair: (pair[0] is None, pair[0] or 0, pair[1]))
    return list(dict.fromkeys(run_id for _start, run_id in found))
