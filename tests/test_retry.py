"""Retry policy on trio's virtual clock: the exact backoff schedule, bounds, and what is never retried."""

from __future__ import annotations

import pytest
import trio

from runner.errors import CallTimeout, JsonRpcError, NotDelivered, OutcomeUnknown
from runner.retry import RetryPolicy, failure_kind, is_safe_to_repeat, retry_not_delivered


async def test_exact_backoff_schedule(autojump_clock: trio.abc.Clock) -> None:
    times: list[float] = []
    start = trio.current_time()

    async def attempt() -> str:
        times.append(trio.current_time() - start)
        if len(times) < 4:
            raise NotDelivered("connect refused")
        return "ok"

    slept: list[float] = []
    result = await retry_not_delivered(
        RetryPolicy(attempts=5, initial=1, maximum=30, jitter=0),
        attempt,
        before_sleep=lambda n, exc, delay: slept.append(delay),
    )
    assert result == "ok"
    assert times == [0, 1, 3, 7]  # waits of 1, 2, 4 seconds
    assert slept == [1, 2, 4]


async def test_attempts_bound(autojump_clock: trio.abc.Clock) -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise NotDelivered("down")

    with pytest.raises(NotDelivered):
        await retry_not_delivered(RetryPolicy(attempts=3, initial=1, jitter=0), attempt)
    assert calls == 3


async def test_total_time_bound_on_the_trio_clock(autojump_clock: trio.abc.Clock) -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise NotDelivered("down")

    start = trio.current_time()
    with pytest.raises(NotDelivered):
        await retry_not_delivered(RetryPolicy(attempts=100, initial=10, maximum=10, jitter=0, total=35), attempt)
    assert calls == 5  # at 0, 10, 20, 30, 40: the deadline (35) passed after the fifth
    assert trio.current_time() - start == 40


@pytest.mark.parametrize("error", [OutcomeUnknown("lost"), CallTimeout("slow"), JsonRpcError(-32602, "bad")])
async def test_delivered_or_answered_requests_are_not_retried(autojump_clock: trio.abc.Clock, error: Exception) -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise error

    with pytest.raises(type(error)):
        await retry_not_delivered(RetryPolicy(attempts=5, initial=1, jitter=0), attempt)
    assert calls == 1


async def test_cancellation_is_never_retried(autojump_clock: trio.abc.Clock) -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        await trio.sleep_forever()

    with trio.move_on_after(5):
        await retry_not_delivered(RetryPolicy(attempts=5, initial=1, jitter=0), attempt)
    assert calls == 1


def test_failure_kinds_and_safety_rule() -> None:
    assert failure_kind(NotDelivered("x")) == "connection-before-send"
    assert failure_kind(OutcomeUnknown("x")) == "outcome-unknown"
    assert failure_kind(CallTimeout("x")) == "timeout"
    assert failure_kind(JsonRpcError(1, "x")) == "protocol-error"
    assert is_safe_to_repeat(idempotent_step=True, trusted=False, read_only=False, idempotent_tool=False)
    assert not is_safe_to_repeat(idempotent_step=False, trusted=False, read_only=True, idempotent_tool=True)
    assert is_safe_to_repeat(idempotent_step=False, trusted=True, read_only=True, idempotent_tool=False)
    assert not is_safe_to_repeat(idempotent_step=False, trusted=True, read_only=False, idempotent_tool=False)
