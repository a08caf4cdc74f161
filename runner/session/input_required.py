"""The 2026-07-28 multi-round-trip loop: a result that says ``input_required`` is answered by policy.

In 2026-07-28 a server that needs input (an elicitation, the client's roots, a sampling) does not send a
request of its own: it answers the client's request with ``resultType: "input_required"``, the requests it
needs answered (``inputRequests``, a map of key to ``{method, params}``) and an opaque ``requestState``.
The client answers each with the :class:`.answers.AnswerPolicy` and sends the original request again (a
new request, new id) with ``inputResponses`` (the same keys) and the ``requestState`` echoed unchanged::

    async def send(params):  # one request of the 2026 wire, returning its raw result
        return await wire.request("tools/call", params)

    result = await resolve_input_required(send, {"name": "deploy", "arguments": {}}, policy, on_answer=log)

Sending again is what the revision asks, and it is not a repeat: the server did not complete the request,
it asked for input first. Bounds and errors (all ``ProtocolError``, the item fails with the text):

- at most ``max_rounds`` (10) rounds of input; one more ``input_required`` is an error naming the count;
- a request the policy refuses (sampling: mcp-run has no model) ends the loop with that refusal;
- an ``input_required`` result without ``inputRequests`` or ``requestState``, or one that cannot be read.

A result without ``resultType`` is complete (results of servers of earlier revisions carry none). The loop
depends on nothing but ``send``: the wire of either transport plugs in there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from runner.errors import MalformedMessage, ProtocolError
from runner.session.answers import Answer, AnswerPolicy, answer_request

__all__ = [
    "INPUT_REQUIRED",
    "MAX_INPUT_ROUNDS",
    "SendRequest",
    "answer_input_requests",
    "is_input_required",
    "resolve_input_required",
]

MAX_INPUT_ROUNDS: Final = 10
INPUT_REQUIRED: Final = "input_required"

SendRequest = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends the request with these params (a new request id each time) and returns its raw result."""


def is_input_required(result: Mapping[str, Any]) -> bool:
    """Whether ``result`` asks for input (``resultType`` absent means complete)."""
    return result.get("resultType") == INPUT_REQUIRED


async def resolve_input_required(
    send: SendRequest,
    params: Mapping[str, Any],
    policy: AnswerPolicy,
    *,
    on_answer: Callable[[Answer], None] | None = None,
    max_rounds: int = MAX_INPUT_ROUNDS,
) -> dict[str, Any]:
    """Send ``params`` and answer ``input_required`` results until one is not; return that one. Each answer
    is handed to ``on_answer`` (to log) before the next round is sent. Raises as the module docstring says,
    and whatever ``send`` raises."""
    base = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    current = dict(params)
    for round_no in range(max_rounds + 1):
        result = await send(current)
        if not is_input_required(result):
            return result
        if round_no == max_rounds:
            raise ProtocolError(
                f"the server still asked for input after {max_rounds} rounds of answers; giving up "
                "(mcp-run answers without a person, see --elicitation)"
            )
        responses = answer_input_requests(result, policy, on_answer)
        current = dict(base)
        if responses:
            current["inputResponses"] = responses
        state = result.get("requestState")
        if state is not None:
            current["requestState"] = state
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def answer_input_requests(
    result: Mapping[str, Any], policy: AnswerPolicy, on_answer: Callable[[Answer], None] | None = None
) -> dict[str, Any]:
    """The ``inputResponses`` for what ``result`` asks (an ``input_required`` result, or a task's status
    that carries ``inputRequests``): each request answered by ``policy`` and handed to ``on_answer``.
    Raises ``MalformedMessage`` for what cannot be read, ``ProtocolError`` when the policy refuses one."""
    requests = _input_requests(result)
    answers: dict[str, Any] = {}
    refused: list[Answer] = []
    for key, request in requests.items():
        answer = _answer_one(policy, key, request)
        if on_answer is not None:
            on_answer(answer)
        if answer.result is None:
            refused.append(answer)
        else:
            answers[key] = answer.result
    if refused:
        what = "; ".join(f"{a.method}: {a.error_message}" for a in refused)
        raise ProtocolError(f"the server needs input mcp-run cannot give: {what}")
    return answers


def _input_requests(result: Mapping[str, Any]) -> dict[str, Any]:
    """The ``inputRequests`` object of an ``input_required`` result ({} for one that holds only a
    ``requestState``); ``MalformedMessage`` when neither is there or either has the wrong type."""
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if requests is None and state is None:
        raise MalformedMessage("an input_required result must hold inputRequests or requestState; it has neither")
    if state is not None and not isinstance(state, str):
        raise MalformedMessage("the requestState of an input_required result must be a string")
    if requests is None:
        return {}
    if not isinstance(requests, dict):
        raise MalformedMessage("the inputRequests of an input_required result must be an object")
    return requests


def _answer_one(policy: AnswerPolicy, key: str, request: Any) -> Answer:
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        raise MalformedMessage(f"input request {key!r} has no method")
    return answer_request(policy, request["method"], request.get("params"))
