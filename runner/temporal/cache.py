"""The cache of a run on Temporal: the results the file's earlier runs there left for steps with ``cache:``,
read once where the run is started and carried in its definition (``RunSpec.cache``), so the workflow stays
deterministic and its step machine looks calls up as a local run's does (:mod:`runner.engine.core.cache`).

A run is read only when it may hold a recent enough result (it did not finish before ``now - horizon``); of its
events, the ``item_succeeded`` records with a ``cache`` digest that were calls (no ``reused_from``) recorded
within ``horizon`` of ``now``; the newest of each digest is kept. A run whose events cannot be read gives none.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from runner.engine.core.cache import entry_time
from runner.errors import McpRunError
from runner.temporal.history import run_events
from runner.temporal.listing import list_runs

__all__ = ["earlier_results"]


async def earlier_results(client: Client, workflow: str, *, now: float, horizon: float) -> list[dict[str, Any]]:
    """``RunSpec.cache`` for a new run of ``workflow`` (its absolute path) as of ``now``."""
    newest: dict[str, dict[str, Any]] = {}
    for run in await list_runs(client):
        if run.workflow != workflow or (run.finished is not None and run.finished.timestamp() < now - horizon):
            continue
        try:
            events = await run_events(client, run.run_id)
        except McpRunError:
            continue
        for event in events:
            digest = event.get("cache")
            if event.get("type") != "item_succeeded" or not isinstance(digest, str) or event.get("reused_from"):
                continue
            at = entry_time(str(event.get("ts", "")))
            result = event.get("result")
            if at is None or now - at > horizon or not isinstance(result, dict):
                continue
            known = newest.get(digest)
            if known is None or at > known["at"]:
                newest[digest] = {"digest": digest, "run_id": run.run_id, "result": result, "at": at}
    return list(newest.values())
