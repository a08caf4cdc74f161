"""How the items of a batch ended when its activity failed on every attempt (the workflow side).

A heartbeat timeout comes with the details of the last heartbeat recorded (the dispatch markers of
:mod:`runner.temporal.markers`): an item that ended there keeps that end; an item marked dispatched without
an end may have reached the server (in doubt); any other item was never sent (a request is written only
after a heartbeat with its mark is recorded). Without those details every item is in doubt.

Temporal gives no heartbeat details with any other failure (an ``ApplicationError``: an unexpected exception
in the activity). So the activity settles its own items when such an exception ends its last attempt
(:func:`own_outcomes`, the activity side), from the markers it holds: the same rule, with what it knows.
"""

from __future__ import annotations

from typing import Any, Final

from temporalio.exceptions import ActivityError, TimeoutError

from runner.engine.core.vocabulary import FailureKind

__all__ = [
    "ACTIVITY_LOST",
    "ATTEMPT_LOST",
    "ATTEMPT_UNSENT",
    "LOST_UNSENT",
    "UNREACHABLE",
    "lost_outcomes",
    "own_outcomes",
    "settled",
]

ACTIVITY_LOST: Final = "its activity failed on every attempt ({error}); it may have been sent"
LOST_UNSENT: Final = "its activity failed on every attempt ({error}); it was not sent"
ATTEMPT_LOST: Final = "the last attempt of its activity failed ({error}); it may have been sent"
ATTEMPT_UNSENT: Final = "the last attempt of its activity failed ({error}); it was not sent"


# An outcome's status when the call's server could not be reached (within its reconnect budget) before anything
# was sent: the workflow fails the step as a local run does when all of the step's calls say so.
UNREACHABLE: Final = "unreachable"


def lost_outcomes(exc: ActivityError, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The outcome of each item of ``batch`` (``{"key", "index", ...}``) after ``exc``."""
    cause = exc.cause or exc
    reason = str(cause) or type(cause).__name__
    details = _last_details(cause)
    if details is None:
        return [_in_doubt(call, ACTIVITY_LOST.format(error=reason)) for call in batch]
    dispatched, ended = details
    return _from_markers(batch, dispatched, ended, ACTIVITY_LOST.format(error=reason), LOST_UNSENT.format(error=reason))


def own_outcomes(batch: list[dict[str, Any]], details: Any, error: BaseException) -> list[dict[str, Any]]:
    """The outcome of each item of ``batch`` when an unexpected ``error`` ends the activity's last attempt,
    from the attempt's own markers (``details``, as :meth:`Markers.details` gives them: ended items and items
    dispatched without an end). An item that ended keeps its end (a ``retry`` settled); one dispatched
    without an end is in doubt; any other was never sent: failed as not sent (a decision or a resume calls it
    again). Malformed details put every item in doubt. Never a ``retry``: nothing is called again."""
    reason = first_words(error)
    parsed = _parse(details)
    if parsed is None:
        return [_in_doubt(call, ATTEMPT_LOST.format(error=reason)) for call in batch]
    dispatched, ended = parsed
    return _from_markers(
        batch, dispatched, ended, ATTEMPT_LOST.format(error=reason), ATTEMPT_UNSENT.format(error=reason)
    )


def first_words(error: BaseException) -> str:
    """A short reason: the exception's first line (of the first exception of a group), or its type."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip().splitlines()
    line = text[0] if text else ""
    return f"{type(error).__name__}: {line[:200]}" if line else type(error).__name__


def _from_markers(
    batch: list[dict[str, Any]], dispatched: set[str], ended: dict[str, dict[str, Any]], maybe: str, unsent: str
) -> list[dict[str, Any]]:
    outcomes: list[dict[str, Any]] = []
    for call in batch:
        key, index = call["key"], call["index"]
        base = {"key": key, "index": index}
        end = ended.get(key)
        if end is not None:
            outcomes.append({**settled(end), **base})
        elif key in dispatched:
            outcomes.append(_in_doubt(call, maybe))
        else:
            outcomes.append({**base, "status": "failed", "kind": FailureKind.NOT_SENT.value, "error": unsent})
    return outcomes


def _in_doubt(call: dict[str, Any], error: str) -> dict[str, Any]:
    kind = FailureKind.OUTCOME_UNKNOWN.value
    return {"key": call["key"], "index": call["index"], "status": "in_doubt", "kind": kind, "error": error}


def _last_details(cause: BaseException) -> tuple[set[str], dict[str, dict[str, Any]]] | None:
    """The markers of the last heartbeat recorded, when Temporal gives them (None otherwise, or malformed)."""
    if not isinstance(cause, TimeoutError) or not cause.last_heartbeat_details:
        return None
    return _parse(cause.last_heartbeat_details[0])


def _parse(details: Any) -> tuple[set[str], dict[str, dict[str, Any]]] | None:
    """Heartbeat details as the keys dispatched and the ends (None when malformed)."""
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
