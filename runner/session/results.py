"""What a 2026-07-28 result's ``resultType`` says (pure, no I/O).

A result without ``resultType``, or with ``"complete"``, is the final result (2025 servers never send one).
``"input_required"`` (the server needs input: elicitation, roots, sampling, then the request is sent again
with ``inputResponses``) is answered before a result gets here (:meth:`runner.session.Session.answer_input`);
one still left fails with ``ResultNotSupported``. ``"task"`` (the tasks extension: the server runs the call
as a task) is followed by the engine's task calls (:mod:`runner.engine.calls.task`); on a path that does not
follow tasks it is :class:`TaskNotFollowed`, in doubt. Any other value is a malformed result.
"""

from __future__ import annotations

from typing import Any, Final

from runner.errors import MalformedMessage, OutcomeUnknown, ProtocolError

__all__ = [
    "COMPLETE",
    "INPUT_REQUIRED",
    "TASK",
    "ResultNotSupported",
    "TaskNotFollowed",
    "complete_result",
    "result_type",
]

COMPLETE: Final = "complete"
TASK: Final = "task"
INPUT_REQUIRED: Final = "input_required"
_KNOWN: Final = frozenset({COMPLETE, TASK, INPUT_REQUIRED})


class ResultNotSupported(ProtocolError):
    """The server answered with a kind of result mcp-run cannot act on yet (a task, a request for input)."""

    def __init__(self, message: str, *, result_type: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result_type = result_type
        self.result = result


class TaskNotFollowed(OutcomeUnknown):
    """The server made the call a task where mcp-run does not follow tasks: the tool runs (or ran), and its
    result is not ours, so the call is in doubt, never a definite failure (which a retry would repeat)."""

    result_type = TASK

    def __init__(self, message: str, *, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def result_type(result: dict[str, Any], *, method: str) -> str:
    """The ``resultType`` of ``result`` (``complete`` when absent); ``MalformedMessage`` for an unknown one."""
    kind = result.get("resultType", COMPLETE)
    if kind not in _KNOWN:
        raise MalformedMessage(f"{method} result has resultType {kind!r:.60}, which is not one MCP defines")
    return str(kind)


def complete_result(method: str, result: dict[str, Any], *, server: str) -> dict[str, Any]:
    """``result`` when it is complete; else raise ``ResultNotSupported`` (a task, input required) naming what
    the server wanted, or ``MalformedMessage`` for an unknown ``resultType``."""
    try:
        kind = result_type(result, method=method)
    except MalformedMessage as exc:
        raise MalformedMessage(f"{server}: {exc}") from None
    if kind == COMPLETE:
        return result
    if kind == TASK:
        task = result.get("task")
        task_id = task.get("taskId") if isinstance(task, dict) else result.get("taskId")
        what = f"ran the call as a task ({task_id!r:.80})" if task_id is not None else "ran the call as a task"
        raise TaskNotFollowed(
            f"{server}: {method}: the server {what}, which this path of mcp-run does not follow, so its result "
            "cannot be collected (the call may still run on the server: in doubt)",
            result=result,
        )
    requests = result.get("inputRequests")
    names = sorted(requests) if isinstance(requests, dict) else []
    wanted = f" ({', '.join(str(n) for n in names)[:200]})" if names else ""
    raise ResultNotSupported(
        f"{server}: {method}: the server needs input from the client{wanted} before it can answer; mcp-run "
        "cannot answer input requests yet",
        result_type=kind,
        result=result,
    )
