"""``run_events`` reads a run's events from its history, and asks a worker (the ``events`` query) only when this
code cannot replay the history (another version of the workflow ran it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from runner.temporal import history

EVENTS = [{"seq": n, "type": "log"} for n in range(1, 5)]


def test_the_history_first_then_the_query_when_it_cannot_be_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    replayable = True

    async def from_history(client: Any, run_id: str) -> list[dict[str, Any]]:
        asked.append("history")
        if not replayable:
            raise history.ReplayFailed("nondeterminism")
        return EVENTS

    async def from_query(client: Any, run_id: str, *, start: int = 0) -> list[dict[str, Any]]:
        asked.append("query")
        return EVENTS[start:]

    monkeypatch.setattr(history, "events_from_history", from_history)
    monkeypatch.setattr(history, "events_of", from_query)
    assert asyncio.run(history.run_events(None, "r", start=1)) == EVENTS[1:]  # type: ignore[arg-type]
    assert asked == ["history"]
    replayable = False
    assert asyncio.run(history.run_events(None, "r", start=3)) == EVENTS[3:]  # type: ignore[arg-type]
    assert asked == ["history", "history", "query"]
