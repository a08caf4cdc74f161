"""How fast calls go to one server that pushes back: one pause per server, and an adaptive pace.

A server that answers 429 (or 503 with Retry-After: ``Throttled``) is asking *us*, not one call, to
slow down. :class:`Pace` is what the server's link keeps about it (pure: every method takes the time), and
:class:`Gate` is what a call passes before it is sent (trio). Until a server first pushes back, the gate
costs nothing (no checkpoint, no timer): a server that never throttles runs exactly as before.

- **Pause.** ``Retry-After`` (or the backoff when the server gave none) pauses every call to the server until
  it has passed, not only the call that got it. Pauses overlap: the later end wins.
- **In-flight limit (AIMD).** It starts at ``max_concurrency``; a throttle halves it (never below 1), at
  most once per pause window (the calls that were already in flight when the first 429 came back, and get
  one too, are the same signal, not a new one: a throttle counts only for a call sent after the last cut);
  it grows by one after as many successes in a row as the limit (one "window"), never above
  ``max_concurrency``.
- **Latency.** Once a server has pushed back, rising latency is the other sign that it is near its limit (its
  queue grows before it refuses): after each window of successes, when the smoothed latency of its calls
  (an EWMA, weight ``_EWMA``) is more than ``LATENCY_RISE`` times the lowest it has been, the limit is cut by a
  quarter instead of grown. Not before the first push back: a batch's tools take as long as their items
  need (a big file, a slow query), so on a server that never refused, a slow call says nothing about load,
  and the limit stays ``max_concurrency``.
- **Rate.** Calls on loopback take milliseconds, so an in-flight limit alone does not slow a fast server's
  callers to its rate: the pace also spaces the starts of calls. At a throttle, the rate the server was seen
  to admit is its successes per second since calls last resumed (over the last ``_WINDOW`` seconds at most;
  the last second after a slow start).
  When less than a second was spent sending (the run, or the pause before, had just begun), that is only a
  floor: the rate starts there and grows ``SLOW_START`` times a second (slow start). Otherwise it is the
  server's rate (``target``): the pace drops to ``BACKOFF`` of it, comes back to it in ``RECOVER`` seconds,
  then probes above it ever faster (``GROWTH``), until the next throttle (a CUBIC-like plateau: most
  of the time is spent at the rate that works). A server's ``rate:`` is a hard cap, from the first call.

Counts (``throttles``, ``pauses``, ``paused_s``) feed the run's summary.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Final

import trio

__all__ = ["BACKOFF", "GROWTH", "LATENCY_RISE", "RECOVER", "SLOW_START", "Gate", "Pace", "PaceCut"]

BACKOFF: Final = 0.8
"""After a throttle, run at this share of the rate the server was seen to admit."""
GROWTH: Final = 0.02
"""Past the server's measured rate, probe above it: by this share of it after one second, four times that after
two (convex: the longer the server admits more, the faster the probe grows; a target measured too low is soon
left behind)."""
RECOVER: Final = 2.0
"""Seconds to come back from ``BACKOFF`` of the measured rate to all of it."""
SLOW_START: Final = 4.0
"""Until the rate is measured over a whole second, it grows this many times per second (slow start)."""
LATENCY_RISE: Final = 2.0
"""A throttled server whose smoothed call latency is more than this many times its lowest is queueing: its
in-flight limit is cut (by a quarter) instead of grown."""
_EWMA: Final = 0.2  # the weight of the newest call in the smoothed latency
_LATENCY_SAMPLES: Final = 8  # calls before the smoothed latency's low counts as the server's unloaded one
_WINDOW: Final = 3.0  # at most this many seconds of successes measure the admitted rate
_MIN_RATE: Final = 0.5  # calls per second: never slower than this


@dataclass(frozen=True, slots=True)
class PaceCut:
    """What a throttle did: the pause ends at ``until`` (``pause`` seconds from now); ``limit`` calls may be
    in flight; ``rate`` calls per second start (None: not paced); ``cut``: the limit and rate were lowered
    now (False: a later answer to a call sent before the last cut)."""

    until: float
    pause: float
    limit: int
    rate: float | None
    cut: bool


class Pace:
    """The pause, the in-flight limit and the rate of one server (see the module docstring); pure."""

    def __init__(self, max_concurrency: int, *, rate: float | None = None) -> None:
        self.max_limit = max(1, max_concurrency)
        self.limit = self.max_limit
        self.cap = rate
        self.paused_until = -math.inf
        self.throttles = 0  # answers of 429/503 (Throttled)
        self.pauses = 0  # pauses started (a throttle during a pause may extend it)
        self.paused_s = 0.0  # seconds paused, overlaps counted once
        self._streak = 0  # successes since the limit last moved
        self._last_cut = -math.inf
        self._resumed = -math.inf  # when calls last started again (the run's first call, or a pause's end)
        self._successes: deque[float] = deque()
        self._base: float | None = None  # the rate set at the last cut
        self._target = 0.0  # the rate the server was seen to admit (when not in slow start)
        self._since = 0.0
        self._slow_start = True
        self._last_start = -math.inf
        self._latency: float | None = None  # the smoothed latency of its calls (seconds)
        self._latency_low = math.inf  # the lowest the smoothed latency has been (after _LATENCY_SAMPLES calls)
        self._samples = 0
        self.latency_cuts = 0  # windows that ended with the limit cut for latency

    @property
    def quiet(self) -> bool:
        """Never throttled and no ``rate:``: calls need not wait for anything here."""
        return self._base is None and self.cap is None

    def rate(self, now: float) -> float | None:
        """Calls per second at ``now`` (None: not paced)."""
        base = self._base
        if base is None:
            return self.cap
        dt = max(0.0, now - self._since)
        if self._slow_start:
            grown: float = base * SLOW_START ** min(dt, 20.0)
        elif dt < RECOVER:
            grown = base + (self._target - base) * dt / RECOVER
        else:
            grown = self._target * (1.0 + GROWTH * (dt - RECOVER) ** 2)
        return grown if self.cap is None else min(self.cap, grown)

    def next_start(self, now: float) -> float:
        """The earliest time a call may start (``now`` when it may at once): after the pause, and one rate
        interval after the last start."""
        at = max(now, self.paused_until)
        rate = self.rate(now)
        if rate is not None and math.isfinite(self._last_start):
            at = max(at, self._last_start + 1.0 / rate)
        return at

    def started(self, now: float) -> None:
        """A call starts at ``now`` (it passed :meth:`next_start`)."""
        if not math.isfinite(self._resumed) or self._last_start < self.paused_until <= now:
            self._resumed = now
        self._last_start = now

    def succeeded(self, now: float, latency: float | None = None) -> None:
        """A call was answered (in ``latency`` seconds, when known): one more success in the window; after a
        window of them the limit grows, or is cut when the server pushed back and its latency rose."""
        self._successes.append(now)
        self._trim(now)
        if latency is not None:
            self._observe(latency)
        self._streak += 1
        if self._streak >= self.limit:
            self._streak = 0
            if self._queueing():
                self.limit = max(1, self.limit - max(1, self.limit // 4))
                self.latency_cuts += 1
            else:
                self.limit = min(self.max_limit, self.limit + 1)

    def _observe(self, latency: float) -> None:
        smoothed = latency if self._latency is None else self._latency + _EWMA * (latency - self._latency)
        self._latency = smoothed
        self._samples += 1
        if self._samples >= _LATENCY_SAMPLES:
            self._latency_low = min(self._latency_low, smoothed)

    def _queueing(self) -> bool:
        """The server pushed back and its calls now take more than ``LATENCY_RISE`` times the least they did."""
        return self._base is not None and self._latency is not None and self._latency > LATENCY_RISE * self._latency_low

    def throttled(self, now: float, *, sent_at: float, pause: float) -> PaceCut:
        """A call sent at ``sent_at`` was answered "not now" at ``now``; ``pause``: seconds to wait (the
        server's ``Retry-After``, or the backoff)."""
        self.throttles += 1
        pause = max(0.0, pause)
        until = now + pause
        if until > self.paused_until:
            self.paused_s += until - max(now, self.paused_until)
            if now >= self.paused_until:
                self.pauses += 1
            self.paused_until = until
        cut = sent_at >= self._last_cut
        if cut:
            self._last_cut = now
            self._streak = 0
            self.limit = max(1, self.limit // 2)
            self._trim(now)
            # After a slow start only its last second is near the server's rate; else the longer the better.
            span = min(1.0 if self._slow_start else _WINDOW, now - self._resumed)
            full = span >= 1.0 and math.isfinite(self._resumed)
            if full:
                admitted = sum(1 for t in self._successes if t >= now - span) / span
                self._target = max(_MIN_RATE, admitted)
                base = BACKOFF * self._target
            else:
                base = max(1.0, float(sum(1 for t in self._successes if t >= self._resumed)))
            self._base = max(_MIN_RATE, base)
            self._slow_start = not full
            self._since = self.paused_until
        return PaceCut(self.paused_until, pause, self.limit, self.rate(max(now, self.paused_until)), cut)

    def _trim(self, now: float) -> None:
        while self._successes and self._successes[0] <= now - _WINDOW:
            self._successes.popleft()


class Gate:
    """What a call to one server passes before it is sent: waits for the pause, a free place under the
    in-flight limit and its turn at the rate (:class:`Pace`); :meth:`leave` after the answer."""

    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        self.in_flight = 0
        self._freed = trio.Event()

    async def enter(self) -> float:
        """Wait for the call's turn and take its place; returns when it started (trio's clock). No
        checkpoint when the server never pushed back."""
        pace = self.pace
        if pace.quiet:
            now = trio.current_time()
            self.in_flight += 1
            pace.started(now)
            return now
        while True:
            now = trio.current_time()
            if self.in_flight >= pace.limit:
                await self._freed.wait()
                continue
            at = pace.next_start(now)
            if at <= now:
                break
            await trio.sleep_until(at)
        self.in_flight += 1
        pace.started(now)
        return now

    def leave(self) -> None:
        """The call that entered is over (answered or not): its place is free."""
        self.in_flight -= 1
        if not self.pace.quiet:
            self._freed.set()
            self._freed = trio.Event()
