"""Progress notifications of a batch activity's calls: the latest per item, bounded, carried in the
activity's heartbeat details beside the dispatch markers, and returned with each item's outcome (the workflow
journals it as a ``progress`` event before the item's end).

Progress never asks for a heartbeat of its own while a marker's heartbeat is due: it rides on the markers'
heartbeats (each carries the whole details) and on :meth:`ProgressBoard.pump`, a throttled heartbeat sent only
when progress changed since the last one and no heartbeat is in flight. A heartbeat that carries progress
also carries every marker (:meth:`runner.temporal.markers.Markers.details`), so it never overwrites one.

A message is masked with the run's secrets (:class:`~runner.masking.Masker`) as it is noted, before it is
cut to ``MAX_MESSAGE``: everything the board hands on (heartbeats, the signals to the workflow, the outcome the
workflow journals) reaches Temporal's history, and from there ``logs`` and ``export``.
"""

from __future__ import annotations

from typing import Any, Final

import trio

from runner.masking import Masker
from runner.protocol.mcp import Progress

__all__ = ["MAX_ITEMS", "MAX_MESSAGE", "PROGRESS_EVERY", "ProgressBoard"]

MAX_ITEMS: Final = 100  # items whose progress a heartbeat carries (the most recent ones)
MAX_MESSAGE: Final = 200  # characters of a progress message kept
PROGRESS_EVERY: Final = 2.0  # seconds between heartbeats sent for progress alone


def _as_json(progress: Progress, masker: Masker) -> dict[str, Any]:
    out: dict[str, Any] = {"progress": progress.progress}
    if progress.total is not None:
        out["total"] = progress.total
    if progress.message is not None:
        out["message"] = masker.mask(progress.message)[:MAX_MESSAGE]  # masked before it is cut
    return out


class ProgressBoard:
    """The latest progress of each item of one attempt (trio side), its messages masked with ``masker``."""

    def __init__(self, masker: Masker | None = None) -> None:
        self._masker = masker if masker is not None else Masker()
        self._latest: dict[str, dict[str, Any]] = {}  # insertion order: the oldest first
        self.changed = False  # since the last heartbeat
        self._fresh: set[str] = set()  # noted since the last report to the workflow

    def note(self, key: str, progress: Progress) -> None:
        self._latest.pop(key, None)
        self._latest[key] = _as_json(progress, self._masker)
        while len(self._latest) > MAX_ITEMS:
            del self._latest[next(iter(self._latest))]
        self.changed = True
        self._fresh.add(key)

    def latest(self, key: str) -> dict[str, Any] | None:
        return self._latest.get(key)

    def done(self, key: str) -> None:
        """The item ended: its progress travels with its outcome, no longer in the heartbeats."""
        self._latest.pop(key, None)
        self._fresh.discard(key)

    def fresh(self) -> dict[str, dict[str, Any]]:
        """The items noted since the last call, with their latest progress (what the workflow is told)."""
        out = {k: self._latest[k] for k in sorted(self._fresh) if k in self._latest}
        self._fresh.clear()
        return out

    def details(self) -> dict[str, dict[str, Any]]:
        """What a heartbeat carries (marks the progress as sent)."""
        self.changed = False
        return dict(self._latest)

    async def pump(self, heartbeat: Any, every: float = PROGRESS_EVERY) -> None:
        """Runs until cancelled: every ``every`` seconds, when progress changed and no heartbeat carried it,
        ``await heartbeat()`` (the markers' :meth:`~runner.temporal.markers.Markers.nudge`)."""
        while True:
            await trio.sleep(every)
            if self.changed:
                await heartbeat()
