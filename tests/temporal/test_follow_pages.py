"""Following a run reads its events in pages of the events query, and asks no query after a short page: on a run
that has closed, each query is a replay of its whole history on a worker, so the empty answer that used to end
every catch-up cost a second replay at the end of every followed run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runner.engine.core.events import Entry, StepStarted, encode
from runner.temporal import client
from runner.temporal.client import events_of_handle, follow


class _Closed:
    """The handle of a run that has ended: its result at once, its events in pages of at most ``limit``."""

    def __init__(self, events: int, limit: int) -> None:
        ts = "2026-12-07T00:00:00.000Z"
        self.entries = [encode(Entry(n + 1, ts, StepStarted(step=f"s{n}"))) for n in range(events)]
        self.limit = limit
        self.queries: list[int] = []

    async def query(self, name: str, since: int) -> list[dict[str, Any]]:
        assert name == "events"
        self.queries.append(since)
        return self.entries[since : since + self.limit]

    async def result(self) -> dict[str, Any]:
        return {"exit_code": 0, "run_id": "r"}


@pytest.mark.parametrize(
    ("events", "queries"),
    [(0, [0]), (2, [0]), (3, [0, 3]), (7, [0, 3, 6]), (9, [0, 3, 6, 9])],
)
def test_follow_reads_every_page_and_stops_at_a_short_one(
    monkeypatch: pytest.MonkeyPatch, events: int, queries: list[int]
) -> None:
    monkeypatch.setattr(client, "QUERY_LIMIT", 3)  # the workflow's page size, as the client knows it
    handle = _Closed(events, limit=3)
    followed = asyncio.run(follow(handle, poll=0.01))  # type: ignore[arg-type]
    assert sorted(followed.state.steps) == sorted(f"s{n}" for n in range(events))
    # The catch-up while the result was pending, then the one after it (from where the first ended): each ends
    # at its first short page.
    assert handle.queries == [*queries, events]


@pytest.mark.parametrize(("events", "queries"), [(0, [0]), (5, [0, 3]), (6, [0, 3, 6])])
def test_events_of_a_run_read_page_by_page(monkeypatch: pytest.MonkeyPatch, events: int, queries: list[int]) -> None:
    monkeypatch.setattr(client, "QUERY_LIMIT", 3)
    handle = _Closed(events, limit=3)
    got = asyncio.run(events_of_handle(handle, "r", start=0))  # type: ignore[arg-type]
    assert [e["step"] for e in got] == [f"s{n}" for n in range(events)]
    assert handle.queries == queries
