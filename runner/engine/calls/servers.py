"""One server's session for the length of a run: opened when first needed, reopened when it is lost.

A :class:`ServerLink` owns the session of one server. Every call asks it for the current session
(:meth:`ServerLink.session`), which waits while the server is being (re)connected; a call that finds the
connection gone (its request surely not delivered, or the stdio server exited) says so with
:meth:`ServerLink.lost`, and a call that got an answer says the server is healthy. One task per link
does the connecting, so a server that went away is probed by one reconnect loop, not by every item at
once, and the console gets one line per attempt instead of one per item.

States and moves (``_MOVES``)::

    IDLE ──> CONNECTING ──> UP ──> RECONNECTING ──> UP ...
                 │                      │
                 └────> FAILED <────────┘          (any other state) ──> CLOSED

- **First connection.** A stdio server gets one attempt: a server that cannot start is misconfigured, and
  restarting it would only repeat the error. An HTTP server that refused the connection, or answered
  ``initialize`` with 429/502/503/504, is tried again with backoff until ``connect_timeout`` has passed.
- **After a loss** (the session was up): reconnect with backoff for at most ``reconnect`` seconds from the
  moment it was lost; the outage ends when a call on the new session is answered, not when it opens. A
  session whose connection died (a stdio server exited) is closed and a new one opened (the server started
  again); a session that still stands (Streamable HTTP, the server could not be reached) is kept and pinged
  until it answers, so calls in flight can still resume their streams and a server that restarted and
  forgot the session gets a new handshake on the same link. A server that comes back and fails every call
  at once is reconnected ever more slowly, within the same budget.
- **Throttling.** A call the server refused for now (``Throttled``: 429, or 503 with Retry-After) is no loss:
  the session stays up; :meth:`ServerLink.throttled` pauses every call to the server and lowers its pace
  (:mod:`runner.engine.calls.pace`; calls pass :attr:`ServerLink.gate`), and says whether the call may go
  out again: a server that keeps refusing, with no call answered, for ``reconnect`` seconds is given up on
  as one that cannot be reached is.
- **Waits** come from :mod:`runner.backoff`; each is announced (``LinkRetrying.delay``) and then slept
  exactly, so the printed schedule is the real one.

Nothing here sends a tool call: what may be sent again is the caller's decision (see
:mod:`runner.engine.calls.retry`). A lost connection only tells callers to wait for the next session.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Final, TypeVar

import trio

from runner.backoff import Backoff
from runner.engine.calls.current import CURRENT_ITEM
from runner.engine.calls.pace import Gate, Pace
from runner.engine.calls.retry import is_safe_to_repeat
from runner.engine.core.events import ServerThrottled
from runner.errors import (
    ConnectFailed,
    McpRunError,
    NotDelivered,
    ProtocolError,
    Throttled,
    TransportError,
    first_line,
)
from runner.launch import workflow_folder
from runner.session import Session
from runner.session.answers import AnswerPolicy, make_policy, roots_from_config
from runner.workflow.plan import Plan

__all__ = [
    "LinkEvent",
    "LinkFailed",
    "LinkLost",
    "LinkOpened",
    "LinkPolicy",
    "LinkRetrying",
    "LinkState",
    "LinkThrottled",
    "ServerLink",
    "answer_policy",
    "has_unsafe_calls",
    "throttled_event",
    "until_delivered",
]


class LinkState(enum.Enum):
    IDLE = "idle"
    """Not needed yet."""
    CONNECTING = "connecting"
    """The first connection is under way (and maybe being retried)."""
    UP = "up"
    """A session is open: calls go out on it."""
    RECONNECTING = "reconnecting"
    """The session was lost: waiting, or opening a new one. Calls wait."""
    FAILED = "failed"
    """Given up: every call gets the error. Final."""
    CLOSED = "closed"
    """The run is over."""


_MOVES: Final[dict[LinkState, frozenset[LinkState]]] = {
    LinkState.IDLE: frozenset({LinkState.CONNECTING, LinkState.CLOSED}),
    LinkState.CONNECTING: frozenset({LinkState.UP, LinkState.FAILED, LinkState.CLOSED}),
    LinkState.UP: frozenset({LinkState.RECONNECTING, LinkState.CLOSED}),
    LinkState.RECONNECTING: frozenset({LinkState.UP, LinkState.FAILED, LinkState.CLOSED}),
    LinkState.FAILED: frozenset(),
    LinkState.CLOSED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class LinkPolicy:
    """``connect_timeout``: how long a first connection may be retried (HTTP only; ``retry_first``).
    ``reconnect``: how long to keep reconnecting after a loss (0: never), or resending calls a server keeps
    refusing for now (``Throttled``). ``max_concurrency`` and ``rate`` (calls per second, None: unpaced)
    bound the server's pace (:mod:`runner.engine.calls.pace`)."""

    connect_timeout: float = 30.0
    reconnect: float = 300.0
    retry_first: bool = True
    backoff: Backoff = field(default_factory=Backoff)
    max_concurrency: int = 8
    rate: float | None = None


@dataclass(frozen=True, slots=True)
class LinkOpened:
    """A session is up: the first one (``reconnects`` 0) or a new one after ``down_for`` seconds."""

    server: str
    session: Session
    reconnects: int
    down_for: float | None


@dataclass(frozen=True, slots=True)
class LinkLost:
    """The session in use was lost (``error``: how; its first line is journaled in ``session_lost``); a
    reconnect follows (see ``LinkRetrying``) or the link fails."""

    server: str
    error: McpRunError


@dataclass(frozen=True, slots=True)
class LinkRetrying:
    """Attempt ``attempt`` failed (or the session was lost); the next one starts in exactly ``delay``
    seconds, and the link gives up when the next wait would end ``remaining`` seconds from now."""

    server: str
    attempt: int
    delay: float
    remaining: float
    error: McpRunError
    first_connection: bool


@dataclass(frozen=True, slots=True)
class LinkFailed:
    """Given up: ``error`` is what every call that needs this server gets."""

    server: str
    error: McpRunError


@dataclass(frozen=True, slots=True)
class LinkThrottled:
    """The server refused a call for now (``status``: 429 or 503) and asked for a ``pause`` of that many seconds
    (``asked``: it said so, else the backoff's); every call to it waits; then at most ``limit`` run at once, at
    ``rate`` calls per second (None: unpaced). ``cut``: the pace was lowered (False: an answer to a call sent
    before the last cut, which only counts)."""

    server: str
    status: int
    pause: float
    asked: bool
    limit: int
    rate: float | None
    cut: bool


LinkEvent = LinkOpened | LinkLost | LinkRetrying | LinkFailed | LinkThrottled


def throttled_event(event: LinkThrottled) -> ServerThrottled:
    """The journal's record of a throttle (``server_throttled``), whichever executor heard it: the local
    scheduler journals it as it happens, the Temporal worker returns it with the outcome of the call refused."""
    return ServerThrottled(
        server=event.server,
        status=event.status,
        pause_s=round(event.pause, 3),
        limit=event.limit,
        rate=round(event.rate, 3) if event.rate is not None else None,
        cut=event.cut or None,
    )


class ServerUnreachable(ConnectFailed):
    """The run gave up reconnecting to a server that went away."""

    retryable = True


class ServerLink:
    """The session of server ``name`` for one run; see the module docstring.

    ``open_session()`` opens a fresh session (spawning or reaching the server and running the handshake);
    ``on_event`` hears about every connection change (the scheduler journals and prints them).
    """

    def __init__(
        self,
        name: str,
        open_session: Callable[[], AbstractAsyncContextManager[Session]],
        policy: LinkPolicy,
        *,
        on_event: Callable[[LinkEvent], None] | None = None,
    ) -> None:
        self.name = name
        self._open = open_session
        self._policy = policy
        self._on_event = on_event
        self._state = LinkState.IDLE
        self._session: Session | None = None
        self._error: McpRunError | None = None
        self._lost_error: McpRunError | None = None
        self._changed = trio.Event()
        self._wake = trio.Event()
        self._closing = False
        self._down_since: float | None = None
        self._failures = 0  # failed attempts in the current outage: the backoff's exponent
        self.reconnects = 0
        self.pace = Pace(policy.max_concurrency, rate=policy.rate)
        self.gate = Gate(self.pace)
        self._throttled_since: float | None = None  # the first refusal since a call was last answered
        self._refusals = 0  # refusals without a Retry-After since then: the backoff's exponent

    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def error(self) -> McpRunError | None:
        """Why the link failed (state FAILED)."""
        return self._error

    def _move(self, state: LinkState) -> None:
        if state not in _MOVES[self._state]:
            raise AssertionError(f"link {self.name}: no move from {self._state.name} to {state.name}")
        self._state = state
        self._changed.set()
        self._changed = trio.Event()

    def _emit(self, event: LinkEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    # -- what callers use --------------------------------------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        """Start connecting, in ``nursery``, unless already started."""
        if self._state is LinkState.IDLE:
            self._move(LinkState.CONNECTING)
            nursery.start_soon(self._run)

    async def session(self) -> Session:
        """The session to send on: waits while (re)connecting; raises the link's error once it failed."""
        while True:
            if self._state is LinkState.UP:
                assert self._session is not None
                return self._session
            if self._state is LinkState.FAILED:
                assert self._error is not None
                raise self._error
            if self._state is LinkState.CLOSED:
                raise NotDelivered(f"{self.name}: the run is closing its sessions")
            if self._state is LinkState.IDLE:
                raise AssertionError(f"link {self.name} was not started")
            await self._changed.wait()

    def current(self) -> Session | None:
        """The session in use, if one is up (never waits)."""
        return self._session if self._state is LinkState.UP else None

    def lost(self, session: Session, error: McpRunError) -> None:
        """A call on ``session`` found the connection gone. Ignored unless ``session`` is the one in use
        (many calls notice the same loss)."""
        if self._state is LinkState.UP and session is self._session:
            # Synchronously: a caller asking for a session right after this must wait for the next one.
            self._lost_error = error
            self._session = None
            if self._down_since is None:
                self._down_since = trio.current_time()
            self._move(LinkState.RECONNECTING)
            self._wake.set()

    def healthy(self, *, sent_at: float | None = None) -> None:
        """A call on the current session got an answer (sent at ``sent_at``, when known: its latency feeds the
        pace): the server works, the outage (if any) is over; the next one gets a whole budget and a backoff
        from its first step."""
        self._throttled_since = None
        self._refusals = 0
        now = trio.current_time()
        self.pace.succeeded(now, now - sent_at if sent_at is not None else None)
        if self._state is LinkState.UP:
            self._down_since = None
            self._failures = 0

    def throttled(self, error: Throttled, *, sent_at: float) -> bool:
        """A call sent at ``sent_at`` was refused for now: pause every call to the server (the pace, see
        :mod:`runner.engine.calls.pace`). True when it may go out again (after the pause: :attr:`gate` waits);
        False when the server has refused calls, none answered, for longer than the ``reconnect`` budget."""
        now = trio.current_time()
        if self._throttled_since is None:
            self._throttled_since = now
        asked = error.retry_after is not None
        if error.retry_after is not None:
            pause = error.retry_after
        else:
            pause = self._policy.backoff.delay(self._refusals)
            self._refusals += 1
        if now + pause - self._throttled_since > self._policy.reconnect:
            self.pace.throttles += 1
            return False
        cut = self.pace.throttled(now, sent_at=sent_at, pause=pause)
        self._emit(LinkThrottled(self.name, error.status_code, pause, asked, cut.limit, cut.rate, cut.cut))
        return True

    async def wait_out(self, error: Throttled, *, sent_at: float) -> bool:
        """:meth:`throttled`, then the pause it set, for a request that passes no :attr:`gate` (a check, a
        reconcile ask): True once it may go out again, False at once when the budget is spent."""
        if not self.throttled(error, sent_at=sent_at):
            return False
        await trio.sleep_until(self.pace.paused_until)
        return True

    def close(self) -> None:
        """Close the session (if any) and stop reconnecting; calls waiting get ``NotDelivered``."""
        self._closing = True
        self._wake.set()

    # -- the connecting task ---------------------------------------------------------------------------

    async def _run(self) -> None:
        CURRENT_ITEM.set(None)  # started by whichever item first needed the server: its requests are no item's
        try:
            await self._connect_loop()
        finally:
            self._session = None
            if self._state not in (LinkState.FAILED, LinkState.CLOSED):  # a failed link keeps its error
                self._move(LinkState.CLOSED)

    async def _connect_loop(self) -> None:
        first = True
        while not self._closing:
            error: McpRunError
            try:
                async with self._open() as session:
                    while True:
                        error = await self._serve(session, first)
                        first = False
                        if self._closing:
                            return
                        self._lose(error)
                        standing = await self._still_standing(session)
                        if standing is None:
                            break
                        if not standing:
                            return
                # Leaving the `async with` closed the old session (and stopped a stdio server).
            except McpRunError as exc:
                if self._closing:
                    return
                error = exc
                if not self._worth_retrying(exc, first):
                    self._fail(exc)
                    return
            if not await self._wait_before_next(error, first):
                return

    async def _still_standing(self, session: Session) -> bool | None:
        """After a loss: True to serve ``session`` again, None for a new session, False when the link is done
        (closing, or its budget spent). A dead connection (a stdio server exited) needs a new session. One that
        still stands (Streamable HTTP: the server could not be reached) is kept: when the server answers again
        its calls in flight may still resume their streams, and a server that forgot the session
        re-initializes it."""
        if session.broken is not None:
            return None
        return await self._probe(session)

    def _lose(self, error: McpRunError) -> None:
        if self._state is LinkState.UP:  # noticed here (a stdio server exited), not by a caller
            self._session = None
            if self._down_since is None:  # the outage starts now, not once the session is closed
                self._down_since = trio.current_time()
            self._move(LinkState.RECONNECTING)
        self._emit(LinkLost(self.name, error))

    async def _probe(self, session: Session) -> bool | None:
        """Ping ``session`` after each backoff until the server answers (True), the budget is spent or the
        link closes (False), or the session breaks (None: open a new one)."""
        error: McpRunError = self._lost_error or NotDelivered(f"{self.name}: unreachable")
        while await self._wait_before_next(error, first=False):
            if session.broken is not None:
                return None
            try:
                await session.ping()
            except McpRunError as exc:
                error = exc
                if session.broken is not None:
                    return None
                continue
            return True
        return False

    async def _serve(self, session: Session, first: bool) -> McpRunError:
        """The session is up: hand it out until it is lost (returns why) or the link closes."""
        now = trio.current_time()
        # The outage is over only once a call on this session is answered (`healthy`): a server that comes
        # back and fails every call at once stays in the same outage, bounded by the same budget.
        down_for = None if first or self._down_since is None else now - self._down_since
        if not first:
            self.reconnects += 1
        self._session = session
        self._lost_error = None
        self._move(LinkState.UP)
        self._emit(LinkOpened(self.name, session, self.reconnects, down_for))
        async with trio.open_nursery() as watch:

            async def broken() -> None:
                self._lost_error = self._lost_error or await session.wait_broken()
                self._wake.set()

            watch.start_soon(broken)
            await self._wake.wait()
            self._wake = trio.Event()
            watch.cancel_scope.cancel()
        if self._closing:
            return NotDelivered(f"{self.name}: closed")
        assert self._lost_error is not None
        return self._lost_error

    def _worth_retrying(self, exc: McpRunError, first: bool) -> bool:
        if isinstance(exc, ProtocolError):
            return False  # it answered, wrongly: trying again gets the same answer
        if first:
            return self._policy.retry_first and isinstance(exc, TransportError) and exc.retryable
        return True

    async def _wait_before_next(self, error: McpRunError, first: bool) -> bool:
        """Wait the backoff before the next attempt; False (after failing the link) when the budget is
        spent, or when the link is closing."""
        now = trio.current_time()
        if self._down_since is None:
            self._down_since = now
        budget = self._policy.connect_timeout if first else self._policy.reconnect
        deadline = self._down_since + budget
        delay = self._policy.backoff.delay(self._failures)
        self._failures += 1
        if budget <= 0:
            self._fail(
                ServerUnreachable(f"{self.name}: the connection was lost (reconnect: false): {first_line(error)}")
            )
            return False
        if now + delay > deadline:
            what = "could not connect" if first else "could not reconnect"
            waited = now - self._down_since
            self._fail(ServerUnreachable(f"{self.name}: {what} for {waited:.1f}s, giving up: {first_line(error)}"))
            return False
        self._emit(LinkRetrying(self.name, self._failures, delay, deadline - now, error, first))
        with trio.move_on_after(delay):
            await self._wake.wait()
        self._wake = trio.Event()
        return not self._closing

    def _fail(self, error: McpRunError) -> None:
        self._error = error
        self._move(LinkState.FAILED)
        self._emit(LinkFailed(self.name, error))


def answer_policy(plan: Plan, name: str, elicitation: str | None = None) -> AnswerPolicy:
    """What server ``name``'s own requests get (:mod:`runner.session.answers`): ``elicitation``
    (``--elicitation``) overrides the server's ``elicitation:``; ``roots:`` are resolved from the workflow's folder."""
    server = plan.servers[name].server
    roots = roots_from_config(tuple(server.roots), workflow_folder(plan)) if server.roots else ()
    return make_policy(elicitation if elicitation is not None else server.elicitation, roots)


def has_unsafe_calls(plan: Plan, name: str) -> bool:
    """Whether some step on server ``name`` is not known, before connecting, to be safe to repeat
    (:func:`~runner.engine.calls.retry.is_safe_to_repeat` without a tool list: ``idempotent: true``). A trusted
    server's annotations are not known yet, so its steps without ``idempotent: true`` count as not safe:
    ``protocol: auto`` then chooses the era where a cut of them survives (``SessionOptions.durable``)."""
    trusted = plan.servers[name].server.trust_annotations
    return any(ps.server == name and not is_safe_to_repeat(ps, trusted, None) for ps in plan.steps.values())


_T = TypeVar("_T")

SAFE_SENDS: Final = 3
"""Sends in all of a request that is safe to repeat (a reconcile tool's) whose session was lost before it was
delivered: the call that left an item in doubt often took its session down with it."""


async def until_delivered(
    link: ServerLink, next_session: Callable[[], Awaitable[Session]], ask: Callable[[Session], Awaitable[_T]]
) -> _T:
    """``ask(session)`` on the session ``next_session`` gives; when it was not delivered (``NotDelivered``), the
    link is told the session is lost and it is asked again on the next one, :data:`SAFE_SENDS` times in all, then
    the ``NotDelivered`` is raised. One refused for now (``Throttled``: 429, 503 with Retry-After) is no loss: the
    link pauses every call to the server (and its record is journaled, ``server_throttled``) and it is asked again
    after the pause, within the server's ``reconnect`` budget, as a call would be. Only for requests safe to
    repeat: both executors' reconcile asks."""
    sends = 0
    while True:
        session = await next_session()
        started = trio.current_time()
        try:
            answer = await ask(session)
        except Throttled as exc:
            if not await link.wait_out(exc, sent_at=started):
                raise  # refused for longer than the budget
            continue
        except NotDelivered as exc:
            sends += 1
            if sends >= SAFE_SENDS:
                raise
            link.lost(session, exc)  # (a later ask waits for the next session)
            continue
        link.healthy(sent_at=started)  # it answered: the outage or the server's refusals (if any) are over
        return answer
