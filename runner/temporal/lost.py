"""How the items of a batch ended when its activity failed on every attempt (the workflow side).

A heartbeat timeout comes with the details of the last heartbeat recorded (the dispatch markers of
:mod:`runner.temporal.markers`): an item that ended there keeps that end; an item marked dispatched without
an end may have reached the server (in doubt); any other item was never sent (a request is written only
after a heartbeat with its mark is recorded). Without those details every item is in doubt.
"""

from __future__ import annotations

from typing import Any, Final

from temporalio.exceptions import ActivityError, TimeoutError

from runner.engine.events import FailureKind

__all__ = ["ACTIVITY_LOST", "LOST_UNSENT", "lost_outcomes", "settled"]

ACTIVITY_LOST: Final = "its activity failed on every attempt ({error}); it may have been sent"
LOST_UNSENT: Final = "its activity failed on every attempt ({error}); it was not sent"


def lost_outcomes(exc: ActivityError, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The outcome of each item of ``batch`` (``{"key", "index", ...}``) after ``exc``."""
    cause = exc.cause or exc
    reason = str(cause) or type(cause).__name__
    details = _last_details(cause)
    outcomes: list[dict[str, Any]] = []
    for call in batch:
        key, index = call["key"], call["index"]
        base = {"key": key, "index": index}
        if details is not None:
            dispatched, ended = details
            end = ended.get(key)
            if end is not None:
                outcomes.append({**settled(end), **base})
                continue
            if key not in dispatched:
                kind = FailureKind.NOT_SENT.value
                outcomes.append({**base, "status": "failed", "kind": kind, "error": LOST_UNSENT.format(error=reason)})
                continue
        kind = FailureKind.OUTCOME_UNKNOWN.value
        outcomes.append({**base, "status": "in_doubt", "kind": kind, "error": ACTIVITY_LOST.format(error=reason)})
    return outcomes


def _last_details(cause: BaseException) -> tuple[set[str], dict[str, dict[str, Any]]] | None:
    """The markers of the last heartbeat recorded, when Temporal gives them (None otherwise, or malformed)."""
    if not isinstance(cause, TimeoutError) or not cause.last_heartbeat_details:
        return None
    details = cause.last_heartbeat_details[0]
    if not isinstance(details, dict):
        return None
    dispatched, ended = details.get("dispatched"), details.get("ended")
    if not isinstance(dispatched, list) or not isinstance(ended, dict):
        return None
    keys = {k for k in dispatched if isinstance(k, str)}
    return keys, {k: v for k, v in ended.items() if isinstance(k, str) and isinstance(v, dict)}


def settled(outcome: dict[str, Any]) -> dict[str, Any]:
    """A recorded end; one to be called again (``retry``) can no longer be: failed as not sent, or in doubt."""
    if outcome.get("status") != "retry":
        return outcome
    kind = FailureKind.of(outcome.get("kind") or FailureKind.NOT_SENT.value)
    return {**outcome, "status": "in_doubt" if kind.in_doubt else "failed"}
