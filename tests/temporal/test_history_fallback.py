"""``run_events`` reads a run's events from its history, and asks a worker (the ``events`` query) only when this
code cannot replay the history (another version of the workflow ran it)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from runner.temporal import history

EVENTS = [{"seq": n, "type": "log"} for n in range(1, 5)]


def test_the_history_first_then_the_query_when_it_cannot_be_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    replayable = True
    run = SimpleNamespace(run_id="r", handle=object())

    async def from_history(client: Any, located: Any) -> list[dict[str, Any]]:
        assert located is run
        asked.append("history")
        if not replayable:
            raise history.ReplayFailed("nondeterminism")
        return EVENTS

    async def from_query(handle: Any, run_id: str, *, start: int = 0) -> list[dict[str, Any]]:
        assert handle is run.handle and run_id == "r"
        asked.append("query")
        return EVENTS[start:]

    monkeypatch.setattr(history, "_replay", from_history)
    monkeypatch.setattr(history, "events_of_handle", from_query)
    assert asyncio.run(history.located_events(None, run, start=1)) == EVENTS[1:]  # type: ignore[arg-type]
    assert asked == ["history"]
    replayable = False
    assert asyncio.run(history.located_events(None, run, start=3)) == EVENTS[3:]  # type: ignore[arg-type]
    assert asked == ["history", "history", "query"]
