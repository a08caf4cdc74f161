"""What a failed or refused MCP POST means, in one table; and the retry timings that go with it.

No I/O: the transport asks ``classify_exception`` or ``classify_status`` and acts on the
``Verdict``. The table, row by row (tested the same way)::

    what happened to the POST                     meaning           action
    ------------------------------------------    ----------------  ---------------------------------------
    ConnectError, ConnectTimeout, PoolTimeout     not delivered     NotDelivered at once: the session's
                                                                    owner decides (the run waits for the
                                                                    server within its reconnect budget)
    UnsupportedProtocol, LocalProtocolError,      never sent        ConnectFailed (our configuration is
      InvalidURL (other errors before writing)                        wrong; retrying cannot help)
    404, or 400 whose body says the session is    not processed     clear the session id, fail the streams
      unknown, and the POST carried a session id                    of that session as outcome unknown,
                                                                    raise SessionExpired: the session
                                                                    re-initializes and resends
    3xx                                           rejected          HTTPStatusError naming the Location;
                                                                    redirects are never followed
    429, or 503 with Retry-After (or the body's   rejected, not     a request: Throttled (NotDelivered, with
      retry_after)                                run               Retry-After, seconds or an HTTP date, or
                                                                    the body's retry_after); initialize or a
                                                                    notification: retried after Retry-After,
                                                                    bounded; then HTTPStatusError
    other 4xx (400, 401, 403, 404 without a       rejected          HTTPStatusError with the status, no retry
      session id, 405, 413, ...)
    401, 403 with an auth hook (:mod:`.authhook`)  rejected, not run  the hook renews the token (or, on a DPoP
                                                                    use_dpop_nonce, takes the server's nonce)
                                                                    and the POST is sent again (not a
                                                                    duplicate: it never ran); when it
                                                                    cannot, ConnectFailed
    5xx (a bare 503 too: a proxy may have         may have been     a request: OutcomeUnknown (no event id
      forwarded the call before answering it)     processed           yet to resume from); ``initialize``
                                                                    (no side effects) and notifications or
                                                                    responses: HTTPStatusError
    WriteError, WriteTimeout, ReadError,          may have been     a request: OutcomeUnknown (before the
      ReadTimeout, RemoteProtocolError,           delivered           response headers there is no event id);
      any other transport error                                       others: OutcomeUnknown as well
    2xx, then the SSE stream ends or drops        may have been     resume by GET with Last-Event-ID if an
      before the response                         delivered           event id was seen; else RequestLost
                                                                      (OutcomeUnknown)

A request that may have reached the server is never POSTed again: a new POST would run the tool twice.

``ResumeBudget`` is the policy for reconnecting a dropped stream: the first reconnect waits exactly the
server's ``retry`` interval (no jitter), later ones back off exponentially with jitter, and the whole
outage is bounded in attempts and in time (trio's clock, so tests run on a virtual one).
"""

from __future__ import annotations

import enum
import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx2
import trio

from runner.backoff import backoff_delay

__all__ = [
    "Action",
    "ResumeBudget",
    "Verdict",
    "classify_exception",
    "classify_status",
    "parse_retry_after",
    "retry_after_in_body",
]


class Action(enum.Enum):
    """What the transport does about a POST."""

    OK = "ok"
    """2xx: hand the body (JSON or SSE) to a reader."""
    RETRY = "retry"
    """Surely not delivered: raise ``NotDelivered`` (safe to send again; the caller decides when)."""
    RETRY_AFTER = "retry-after"
    """Rate limited (429): send again after ``Retry-After`` (bounded), else ``HTTPStatusError``."""
    SESSION_EXPIRED = "session-expired"
    """404 (or 400 naming the session) on a POST that carried our session id: raise ``SessionExpired``."""
    REJECTED = "rejected"
    """The server refused it (3xx, 4xx): raise ``HTTPStatusError``; not retried."""
    MISCONFIGURED = "misconfigured"
    """httpx2 refused to send it at all: raise ``ConnectFailed``."""
    IN_DOUBT = "in-doubt"
    """It may have been processed: ``OutcomeUnknown`` for a request (never a retry)."""


@dataclass(slots=True, frozen=True)
class Verdict:
    action: Action
    meaning: str


_NOT_DELIVERED = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
_NEVER_SENT = (httpx2.UnsupportedProtocol, httpx2.LocalProtocolError, httpx2.InvalidURL)


def classify_exception(exc: BaseException) -> Verdict:
    """The verdict for an exception raised while a POST was being sent or its headers awaited."""
    if isinstance(exc, _NOT_DELIVERED):
        return Verdict(Action.RETRY, "not delivered")
    if isinstance(exc, _NEVER_SENT):
        return Verdict(Action.MISCONFIGURED, "never sent")
    return Verdict(Action.IN_DOUBT, "may have been delivered")


# What servers say about a session they do not know (TypeScript SDK: "Bad Request: No valid session ID
# provided"; others: "Session not found", "invalid session id", "unknown session", "session expired").
_UNKNOWN_SESSION = re.compile(
    r"\b(no valid|invalid|unknown|expired|missing) session"
    r"|\bsession( id)? ((is |was )?(not found|invalid|unknown|expired)|has expired|does not exist)",
    re.IGNORECASE,
)


def classify_status(status: int, *, carried_session: bool, body: str = "", asked_to_wait: bool = False) -> Verdict:
    """The verdict for the HTTP status of a POST's response; ``body`` is the start of its error body;
    ``asked_to_wait``: the response said when to come back (``Retry-After``, or ``retry_after`` in its body).

    A 503 is "not now" only when it says when to come back: an overloaded server that sheds load does, while a
    bare 503 can come from a proxy that had already forwarded the call, so it stays in doubt like any 5xx."""
    if 200 <= status < 300:
        return Verdict(Action.OK, "accepted")
    if carried_session and (status == 404 or (status == 400 and _UNKNOWN_SESSION.search(body))):
        # 404 is what the specification asks for; TypeScript-SDK servers answer 400 "No valid session ID
        # provided". Either way the request was refused before it ran: re-initializing is safe.
        return Verdict(Action.SESSION_EXPIRED, "not processed: the session is gone")
    if status == 429:
        return Verdict(Action.RETRY_AFTER, "rejected: rate limited")
    if status == 503 and asked_to_wait:
        return Verdict(Action.RETRY_AFTER, "rejected: unavailable, asked to wait")
    if 300 <= status < 500:
        return Verdict(Action.REJECTED, "rejected")
    return Verdict(Action.IN_DOUBT, "may have been processed")


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date; ``None`` when
    absent or unreadable. A date in the past gives 0.

    >>> parse_retry_after("3")
    3.0
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:05 GMT", now=datetime(2015, 10, 21, 7, 28, tzinfo=UTC))
    5.0
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    seconds = (when - current).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


_RETRY_FIELDS = ("retry_after", "retry_after_seconds", "retryAfter", "retryAfterSeconds")


def retry_after_in_body(body: bytes) -> float | None:
    """Seconds to wait that a JSON error body asks for: a ``retry_after`` or ``retry_after_seconds`` field (or
    their camelCase forms) at the top, in a JSON-RPC ``error``, or in its ``data``; ``None`` when there is none
    (or it is not a non-negative finite number).

    >>> retry_after_in_body(b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "slow down",'
    ...                     b' "data": {"retry_after_seconds": 2.5}}}')
    2.5
    """
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    places = [value]
    if isinstance(value, dict) and isinstance(value.get("error"), dict):
        places += [value["error"], value["error"].get("data")]
    for place in places:
        if not isinstance(place, dict):
            continue
        for name in _RETRY_FIELDS:
            seconds = place.get(name)
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                continue
            if math.isfinite(seconds) and seconds >= 0:
                return float(seconds)
    return None


class ResumeBudget:
    """How long to wait before each reconnect of one dropped stream, and when to give up.

    An *outage* starts when a stream ends or drops before its response. Reconnect ``n`` (from 0) waits
    ``base * 2**n`` seconds, capped at ``max_delay``, where ``base`` is the server's last ``retry:``
    (or ``default_retry_ms``); reconnect 0 waits exactly ``base``, later ones add up to ``jitter``
    seconds at random. The outage is over budget after ``attempts`` reconnects, or when the next wait
    would end past ``timeout`` seconds after the outage began. ``progress()`` (a reconnect that brought
    new events) starts a fresh outage: a server that closes its connections on purpose every so often
    (SEP-1699 polling) can keep a long call alive indefinitely, as long as each reconnect gets somewhere.
    """

    __slots__ = ("_attempt", "_deadline", "attempts", "default_retry_ms", "jitter", "max_delay", "rng", "timeout")

    def __init__(
        self,
        *,
        attempts: int,
        timeout: float,
        default_retry_ms: int,
        max_delay: float,
        jitter: float,
        rng: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self.attempts = attempts
        self.timeout = timeout
        self.default_retry_ms = default_retry_ms
        self.max_delay = max_delay
        self.jitter = jitter
        self.rng = rng
        self._attempt = 0
        self._deadline = trio.current_time() + timeout

    @property
    def attempt(self) -> int:
        """Reconnects made in the current outage."""
        return self._attempt

    def progress(self) -> None:
        """The last reconnect delivered new events: the next drop starts a fresh outage."""
        self._attempt = 0
        self._deadline = trio.current_time() + self.timeout

    def next_delay(self, retry_ms: int | None) -> float | None:
        """Seconds to wait before the next reconnect, or ``None`` when the budget is spent.

        Counts the reconnect: call it once per GET about to be made."""
        if self._attempt >= self.attempts:
            return None
        base = (retry_ms if retry_ms is not None else self.default_retry_ms) / 1000
        # The first reconnect waits exactly what the server asked for (conformance: sse-retry).
        jitter = self.jitter if self._attempt > 0 else 0.0
        delay = backoff_delay(
            self._attempt, initial=base, maximum=max(self.max_delay, base), jitter=jitter, rng=self.rng
        )
        if trio.current_time() + delay > self._deadline:
            return None
        self._attempt += 1
        return delay

    def remaining(self) -> float:
        """Seconds left in the current outage (never negative)."""
        return max(0.0, self._deadline - trio.current_time())
