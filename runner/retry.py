"""When a call may be made again, and how long to wait before it.

The one rule (the README repeats it): **a request that may have reached the server is never sent again**
unless the tool is safe to repeat. Safe means the step says ``idempotent: true``, or the server is trusted
(``trust_annotations: true``) and the tool is annotated read-only or idempotent.

==============================================  ===================  ================================
what happened                                   failure kind         again?
==============================================  ===================  ================================
``NotDelivered`` (surely not sent)              connection-before-   yes, with backoff and jitter,
                                                send                 bounded by attempts and time
``OutcomeUnknown`` (sent, result lost)          outcome-unknown      only when safe
``CallTimeout`` (no result in time)             timeout              only when safe
``ProtocolError`` / ``JsonRpcError``            protocol-error       never
``isError: true``                               tool-error           never
trio cancellation (interrupt)                   cancelled            never (in doubt on resume)
==============================================  ===================  ================================

Backoff uses tenacity with ``trio.sleep`` (so tests run on trio's virtual clock), retries only the error
types named here (never ``trio.Cancelled``), and bounds total time with a trio deadline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity
import trio

from runner.errors import (
    CallTimeout,
    ConnectFailed,
    HTTPStatusError,
    McpRunError,
    NotDelivered,
    OutcomeUnknown,
    ProtocolError,
    ToolError,
)

__all__ = ["RetryPolicy", "failure_kind", "is_safe_to_repeat", "retry_not_delivered"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds for retrying what surely was not delivered (and connection set-up)."""

    attempts: int = 5
    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.5
    total: float = 120.0

    def wait(self) -> tenacity.wait.wait_base:
        """``initial * 2**(n-1)`` capped at ``maximum``, plus up to ``jitter`` seconds at random."""
        exponential = tenacity.wait_exponential(multiplier=self.initial, max=self.maximum)
        return exponential + tenacity.wait_random(0, self.jitter) if self.jitter > 0 else exponential


def failure_kind(exc: BaseException) -> str:
    """The journal's name for how a call failed (``runner.journal.FAILURE_KINDS``)."""
    if isinstance(exc, trio.Cancelled):
        return "cancelled"
    if isinstance(exc, CallTimeout):
        return "timeout"
    if isinstance(exc, OutcomeUnknown):
        return "outcome-unknown"
    if isinstance(exc, NotDelivered | ConnectFailed | HTTPStatusError):
        return "connection-before-send"
    if isinstance(exc, ProtocolError):
        return "protocol-error"
    if isinstance(exc, ToolError):
        return "tool-error"
    return "template-error"


def is_safe_to_repeat(*, idempotent_step: bool, trusted: bool, read_only: bool, idempotent_tool: bool) -> bool:
    """May a call whose outcome is unknown be made again?"""
    return idempotent_step or (trusted and (read_only or idempotent_tool))


class _OutOfTime(tenacity.stop.stop_base):
    """Stop once trio's clock passes ``deadline``: virtual in tests, and never cuts an attempt in flight."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return trio.current_time() >= self.deadline


async def retry_not_delivered(
    policy: RetryPolicy,
    attempt: Callable[[], Awaitable[T]],
    *,
    retry_on: tuple[type[McpRunError], ...] = (NotDelivered,),
    before_sleep: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, retrying only ``retry_on`` errors (by default, requests that
    surely never reached the server), within ``policy``'s attempts and total time."""
    deadline = trio.current_time() + policy.total
    # Nearly every call succeeds at once, and setting tenacity up costs more than a whole tool call over a pipe:
    # the first attempt runs outside it. A retryable failure of that attempt is replayed as tenacity's first
    # attempt, so counting, waits, the hook and the deadline are exactly those of a loop run all by tenacity.
    try:
        return await attempt()
    except retry_on as exc:
        first_failure: BaseException | None = exc

    async def replay_then_attempt() -> T:
        nonlocal first_failure
        if first_failure is not None:
            failure, first_failure = first_failure, None
            raise failure
        return await attempt()

    def hook(state: tenacity.RetryCallState) -> None:
        if before_sleep is not None and state.outcome is not None:
            exc = state.outcome.exception()
            delay = state.next_action.sleep if state.next_action is not None else 0.0
            if exc is not None:
                before_sleep(state.attempt_number, exc, delay)

    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.attempts) | _OutOfTime(deadline),
        wait=policy.wait(),
        retry=tenacity.retry_if_exception_type(retry_on),
        sleep=trio.sleep,
        reraise=True,
        before_sleep=hook,
    )
    async for try_ in retrying:
        with try_:
            return await replay_then_attempt()
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover
