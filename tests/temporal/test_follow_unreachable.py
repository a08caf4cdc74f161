"""Following a run when Temporal stays away longer than the SDK's retries: exit 4, not a traceback."""

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
        asyncio.run(follow(_Gone(), poll=0.01))  # type: ignore[arg-type]
    assert caught.value.exit_code == ExitCode.UNREACHABLE
    assert "connection refused" in str(caught.value)
