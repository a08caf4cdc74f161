"""When a call may be made again.

The one rule (docs/running.md repeats it): **a request that may have reached the server is never sent again**
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

:func:`classify` is that table for both retry loops (the local item's, :class:`runner.engine.calls.item.ItemCall`,
and the Temporal batch's, :mod:`runner.temporal.batch`): each turns its :class:`Verdict` into its own
mechanics (the local loop waits for the link's next session; the batch leaves what is surely not sent to the
activity's next attempt). The waits come from :mod:`runner.backoff`, and reconnecting is
:mod:`runner.engine.calls.servers`'s.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

import trio

from runner.engine.core.vocabulary import FailureKind
from runner.errors import (
    CallTimeout,
    ConnectFailed,
    HTTPStatusError,
    InvalidCall,
    NotDelivered,
    OutcomeUnknown,
    ProtocolError,
)
from runner.protocol.mcp import ToolError

__all__ = [
    "RetryPolicy",
    "Verdict",
    "classify",
    "failure_kind",
    "is_safe_to_repeat",
    "reads_annotations",
    "wants_safety",
]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds for calling again: a tool that is safe to repeat after its outcome was unknown, at most
    ``attempts`` calls in all, and no new one ``total`` seconds after the first; a call refused because the
    server forgot its session is sent again on the renewed one ``renewed`` times before the link is told; a
    Temporal batch sends a request surely not delivered again on a new session ``not_delivered`` times in all
    before it leaves it to the activity's next attempt."""

    attempts: int = 5
    total: float = 120.0
    renewed: int = 3
    not_delivered: int = 3


class Verdict(enum.Enum):
    """What a retry loop does after an attempt raised (:func:`classify`)."""

    RESEND = "resend"
    """Surely not delivered (``NotDelivered``; ``SessionExpired`` is one): send it again, on a new session."""
    REPEAT = "repeat"
    """Sent, outcome unknown, safe to repeat: call again (after the backoff, within the policy)."""
    IN_DOUBT = "in-doubt"
    """It may have run and is not safe to repeat: never sent again."""
    NOT_SENT = "not-sent"
    """The server could not be reached before it was sent: not in this attempt (a later one may)."""
    FAILED = "failed"
    """A definite answer (a protocol error, refused before sending...): never sent again."""


def wants_safety(error: BaseException) -> bool:
    """Whether :func:`classify` needs to know if the call is safe to repeat for ``error`` (asking it means
    listing the server's tools: only then)."""
    return isinstance(error, OutcomeUnknown)


def classify(error: BaseException, *, sent: bool, safe: bool) -> Verdict:
    """The verdict on an attempt that raised ``error``; ``sent``: its request was written; ``safe``: the call is
    safe to repeat (read only when :func:`wants_safety`)."""
    if isinstance(error, NotDelivered):
        return Verdict.RESEND
    if isinstance(error, OutcomeUnknown):
        return Verdict.REPEAT if safe else Verdict.IN_DOUBT
    kind = failure_kind(error)
    if kind is FailureKind.NOT_SENT and not sent:
        return Verdict.NOT_SENT
    return Verdict.IN_DOUBT if sent and kind.in_doubt else Verdict.FAILED


def failure_kind(exc: BaseException) -> FailureKind:
    """How a call failed, in the journal's words (:class:`~runner.engine.core.vocabulary.FailureKind`)."""
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


class _Step(Protocol):
    """A planned step as the rule reads it (:class:`runner.workflow.plan.PlannedStep`)."""

    @property
    def idempotent(self) -> bool: ...


class _Annotations(Protocol):
    @property
    def read_only(self) -> bool: ...

    @property
    def idempotent(self) -> bool: ...


class _Tool(Protocol):
    """A listed tool as the rule reads it (:class:`runner.protocol.mcp.Tool`)."""

    @property
    def annotations(self) -> _Annotations: ...


def reads_annotations(step: _Step, trusted: bool) -> bool:
    """Whether :func:`is_safe_to_repeat` depends on the tool's annotations (else it needs no tool list)."""
    return trusted and not step.idempotent


def is_safe_to_repeat(step: _Step, trusted: bool, tool: _Tool | None) -> bool:
    """May a call whose outcome is unknown be made again? When the step says ``idempotent: true``, or the server
    is trusted (``trusted``) and ``tool`` (None: not known) is annotated read-only or idempotent."""
    if step.idempotent:
        return True
    return trusted and tool is not None and (tool.annotations.read_only or tool.annotations.idempotent)
