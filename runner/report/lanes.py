"""Calls over time, per server, in time buckets: what a report draws instead of one mark per call.

Each call (one attempt of an item: from its ``item_dispatched`` to its answer) is a :class:`CallSpan`, and each
wait before a retry (from the failed attempt's answer to the next attempt's dispatch) a :class:`WaitSpan`;
:func:`lanes_of` counts, per server and per bucket, the calls that ended there by how they ended, the average
number in flight (the time calls spent in the bucket, over its width) and the average number of items waiting
to be retried (likewise). The size of the result is servers x buckets, whatever the number of calls. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

__all__ = ["Bucket", "CallSpan", "Lane", "Outcome", "WaitSpan", "lanes_of"]


class Outcome(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRIED = "retried"  # the attempt failed, another followed
    IN_DOUBT = "in-doubt"  # no answer (or the outcome is unknown)
    RECONCILED = "reconciled"  # no answer, then the step's reconcile tool said the call happened


@dataclass(slots=True)  # not frozen: built once per call, and a frozen one costs three times as much to build
class CallSpan:
    server: str
    start: float  # POSIX seconds
    end: float
    outcome: Outcome


@dataclass(slots=True)
class WaitSpan:
    """An item of ``server`` waiting to be retried (its backoff), from ``start`` to ``end`` (POSIX seconds)."""

    server: str
    start: float
    end: float


@dataclass(slots=True)
class Bucket:
    """The calls of one server that ended in one time bucket, by outcome; ``busy``: the seconds calls spent
    in flight during it (``busy / width`` is the average concurrency); ``waiting``: the seconds items spent
    waiting to be retried during it."""

    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    in_doubt: int = 0
    reconciled: int = 0
    busy: float = 0.0
    waiting: float = 0.0

    @property
    def ended(self) -> int:
        return self.succeeded + self.failed + self.retried + self.in_doubt + self.reconciled


@dataclass(slots=True)
class Lane:
    server: str
    buckets: list[Bucket]
    calls: int = 0
    totals: Bucket = field(default_factory=Bucket)
    waits: int = 0  # retry waits (their seconds: ``totals.waiting``)


def lanes_of(
    spans: Iterable[CallSpan], t0: float, t1: float, buckets: int, waits: Iterable[WaitSpan] = ()
) -> tuple[tuple[Lane, ...], float]:
    """One lane per server (in the order they first appear), each ``buckets`` buckets from ``t0`` to ``t1``;
    and the width of a bucket in seconds."""
    count = max(buckets, 1)
    width = max(t1 - t0, 1e-3) / count
    lanes: dict[str, Lane] = {}

    def lane_of(server: str) -> Lane:
        lane = lanes.get(server)
        if lane is None:
            lane = lanes[server] = Lane(server, [Bucket() for _ in range(count)])
        return lane

    for span in spans:
        lane = lane_of(span.server)
        lane.calls += 1
        last = min(int((span.end - t0) / width), count - 1)
        _count(lane.buckets[max(last, 0)], span.outcome)
        _count(lane.totals, span.outcome)
        for i, seconds in _overlaps(span.start - t0, span.end - t0, width, count):
            lane.buckets[i].busy += seconds
    for wait in waits:
        lane = lane_of(wait.server)
        lane.waits += 1
        lane.totals.waiting += max(wait.end - wait.start, 0.0)
        for i, seconds in _overlaps(wait.start - t0, wait.end - t0, width, count):
            lane.buckets[i].waiting += seconds
    return tuple(lanes.values()), width


def _count(bucket: Bucket, outcome: Outcome) -> None:
    if outcome is Outcome.SUCCEEDED:
        bucket.succeeded += 1
    elif outcome is Outcome.FAILED:
        bucket.failed += 1
    elif outcome is Outcome.RETRIED:
        bucket.retried += 1
    elif outcome is Outcome.RECONCILED:
        bucket.reconciled += 1
    else:
        bucket.in_doubt += 1


def _overlaps(start: float, end: float, width: float, count: int) -> Iterator[tuple[int, float]]:
    """The buckets the time from ``start`` to ``end`` (seconds from the run's start) overlaps, and the seconds it
    spends in each."""
    first = min(max(int(start / width), 0), count - 1)
    last = min(max(int(end / width), 0), count - 1)
    if first == last:
        yield first, max(end - start, 0.0)
        return
    yield first, (first + 1) * width - start
    for i in range(first + 1, last):
        yield i, width
    yield last, max(end - last * width, 0.0)
