"""The one backoff formula: how long to wait before attempt ``n + 1`` after ``n`` failures.

Every wait mcp-run makes before trying again uses it: reconnecting to a server that went away, calling
again a tool that is safe to repeat, POSTing again after a 429 without ``Retry-After``, resuming a
dropped SSE stream after its first reconnect. The delay is computed once, printed, and slept exactly, so
what the console says is what happens.

::

    delay(n) = min(initial * 2**n, maximum) + uniform(0, jitter)

>>> [backoff_delay(n, initial=0.5, maximum=30.0, jitter=0.0) for n in range(8)]
[0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "backoff_delay"]


def backoff_delay(
    attempt: int,
    *,
    initial: float,
    maximum: float,
    jitter: float,
    rng: Callable[[float, float], float] = random.uniform,
) -> float:
    """``initial * 2.0**attempt`` capped at ``maximum``, plus up to ``jitter`` seconds at random.

    ``attempt`` counts from 0 (the wait after the first failure)."""
    delay = min(initial * 2.0 ** min(attempt, 64), maximum)
    if jitter > 0:
        delay += rng(0.0, jitter)
    return delay


@dataclass(frozen=True, slots=True)
class Backoff:
    """The parameters of :func:`backoff_delay`, as one value that policies carry."""

    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.5
    rng: Callable[[float, float], float] = random.uniform

    def delay(self, attempt: int) -> float:
        return backoff_delay(attempt, initial=self.initial, maximum=self.maximum, jitter=self.jitter, rng=self.rng)
