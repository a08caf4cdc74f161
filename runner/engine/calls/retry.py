"""When a call may be made again.

The one rule (the README repeats it): **a request that may have reached the server is never sent again**
unless the tool is safe to repeat. Safe means the step says ``idempotent: true``, or the server is trusted
(``trust_annotations: true``) and the tool is annotated read-only or idempotent.

==============================================  ===================  ===================================
what happened                                   failure kind         again?
==============================================  ===================  ===================================
``NotDelivered`` (surely not sent)              connection-before-   yes, once the server's link has a
                                                send                 session again (within its
                                                                     ``reconnect`` budget)
``OutcomeUnknown`` (sent, result lost)          outcome-unknown      only when safe, after the backoff,
                                                                     within ``RetryPolicy``
``CallTimeout`` (no result in time)             timeout              only when safe (as above)
``ProtocolError`` / ``JsonRpcError``            protocol-error       never
``isError: true``                               tool-error           never
trio cancellation (interrupt)                   cancelled            never (in doubt on resume)
``InvalidCall`` (refused before sending)        invalid-call         not in this run (nothing was sent: a
                                                                     resume or ``--retry-failed`` calls it)
==============================================  ===================  ===================================

The waits come from :mod:`runner.backoff`; the loop that applies this table is the scheduler's item path
(``runner.engine.scheduler._ItemCall``), and reconnecting is :mod:`runner.engine.servers`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from runner.engine.core.events import FailureKind
from runner.errors import (
    CallTimeout,
    ConnectFailed,
    HTTPStatusError,
    InvalidCall,
    NotDelivered,
    OutcomeUnknown,
    ProtocolError,
    ToolError,
)

__all__ = ["RetryPolicy", "failure_kind", "is_safe_to_repeat"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds for calling again a tool that is safe to repeat after its outcome was unknown: at most
    ``attempts`` calls in all, and no new one ``total`` seconds after the first."""

    attempts: int = 5
    total: float = 120.0


def failure_kind(exc: BaseException) -> FailureKind:
    """How a call failed, in the journal's words (:class:`~runner.engine.core.events.FailureKind`)."""
    if isinstance(exc, trio.Cancelled):
        return FailureKind.CANCELLED
    if isinstance(exc, CallTimeout):
        return FailureKind.TIMEOUT
    if isinstance(exc, OutcomeUnknown):
        return FailureKind.OUTCOME_UNKNOWN
    if isinstance(exc, NotDelivered | ConnectFailed):
        return FailureKind.NOT_SENT
    if isinstance(exc, ProtocolError | HTTPStatusError):
        return FailureKind.PROTOCOL_ERROR  # an HTTPStatusError here is a 4xx to the call: refused, an answer
    if isinstance(exc, ToolError):
        return FailureKind.TOOL_ERROR
    if isinstance(exc, InvalidCall):
        return FailureKind.INVALID_CALL
    return FailureKind.TEMPLATE_ERROR


def is_safe_to_repeat(*, idempotent_step: bool, trusted: bool, read_only: bool, idempotent_tool: bool) -> bool:
    """May a call whose outcome is unknown be made again?"""
    return idempotent_step or (trusted and (read_only or idempotent_tool))
