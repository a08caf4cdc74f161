"""Following a run when Temporal is away longer than the SDK's retries: followed on when it comes back within
the follower's patience (a dev server restarting on a loaded machine); exit 4, not a traceback, after."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from runner.exitcodes import ExitCode
from runner.temporal.client import TemporalUnreachable, follow


class _Gone:
    """A run's handle while the frontend is down: queries and the result's long poll fail."""

    async def query(self, *args: Any, **kwargs: Any) -> Any:
        raise RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")

    async def result(self) -> Any:
        await asyncio.sleep(0)
        raise RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")


def test_a_run_followed_while_temporal_is_unreachable_ends_with_exit_4() -> None:
    with pytest.raises(TemporalUnreachable) as caught:
        asyncio.run(follow(_Gone(), poll=0.01, patience=0.05))  # type: ignore[arg-type]
    assert caught.value.exit_code == ExitCode.UNREACHABLE
    assert "connection refused" in str(caught.value)


class _Restarting(_Gone):
    """The frontend down for the SDK's retries of two waits, then back with the run's result."""

    def __init__(self) -> None:
        self.waits = 0

    async def result(self) -> Any:
        self.waits += 1
        if self.waits <= 2:
            return await super().result()
        return {"exit_code": 0, "run_id": "r"}


def test_a_run_followed_across_a_temporal_restart_gets_its_result() -> None:
    handle = _Restarting()
    followed = asyncio.run(follow(handle, poll=0.01, patience=30))  # type: ignore[arg-type]
    assert followed.result == {"exit_code": 0, "run_id": "r"}
    assert handle.waits == 3
