"""Choosing the protocol era of a session: ``server/discover`` first, the ``initialize`` handshake for older
servers (2026-07-28, "Backward Compatibility with Initialization-Based Versions").

``protocol`` (``SessionOptions.protocol``: ``auto`` or an exact revision) decides what is tried:

- ``auto``: probe ``server/discover`` at 2026-07-28. A ``DiscoverResult`` naming 2026-07-28 makes the session
  modern. Anything that is not a recognized modern answer means an older server, and the session falls back
  to ``initialize``: over HTTP a 4xx without a modern JSON-RPC error body (a 2025 server answers 400 "no
  session" or 404/405), a JSON-RPC error other than -32020/-32021/-32022 (-32601: no such method), a
  ``DiscoverResult`` that names no modern version; over stdio also a probe that gets no answer within
  ``PROBE_TIMEOUT`` (an old server may ignore a method it does not know). A -32022 whose ``supported`` list
  names legacy versions falls back too; one naming only versions mcp-run does not speak is an error.
  Connection failures are not an era verdict: they fail the connect as they always did.
- a modern revision: the probe must succeed; otherwise ``ConnectFailed`` (exit 4) says what the server
  supports (-32022's ``data.supported``) or what it answered.
- a legacy revision: no probe; ``initialize`` offers exactly that revision and a server that chooses
  another one fails the connect.

Under ``auto`` the era is chosen for durability first (:func:`choose_era`): when some call on the server is not
safe to repeat (``SessionOptions.durable``), the era is the one in which a cut of such a call survives.
2026-07-28 streams cannot be resumed ("Resumable SSE streams via Last-Event-ID are not supported"), so a
server that answers ``server/discover`` but offers no tasks extension is asked ``initialize`` too (over HTTP
only: over stdio a cut is the server's exit, which no era resumes); a server that accepts it is spoken to in
2025-11-25, whose streams resume by GET with ``Last-Event-ID``. Whether they do (an event id on the stream)
is known before a call only from the handshake's own answer: an SSE answer with ids (a server with an event
store primes each stream) or without; a JSON answer says nothing. It is not probed further: a 2025-11-25
server without event ids leaves a cut in doubt, as 2026-07-28 would, so the choice never loses durability;
the connect line says what is known. The cost is one round trip (the
``initialize``) at the first connect of a run, for such workflows only; the verdict is remembered for the run.

The outcome is remembered in ``SessionOptions.era_memory`` (one per server for the run): a session opened
again for the same server (after a reconnect) skips the probe, and the ``initialize`` try.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from runner.errors import (
    CallTimeout,
    ConnectFailed,
    HTTPStatusError,
    JsonRpcError,
    ProtocolError,
    TransportError,
)
from runner.protocol.tasks2026 import server_takes_tasks
from runner.session.era import (
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    MODERN_ERRORS,
    UNSUPPORTED_VERSION,
    is_modern,
    modern_error,
)
from runner.transports.base import EventIds

if TYPE_CHECKING:
    from runner.session.session import Session

__all__ = [
    "ASK_INITIALIZE",
    "LEGACY",
    "MODERN",
    "PROBE_TIMEOUT",
    "DiscoverInfo",
    "EraChoice",
    "choose_era",
    "judge_error",
    "negotiate",
    "parse_discover_result",
]

LEGACY: Final = "legacy"
MODERN: Final = "modern"
ASK_INITIALIZE: Final = "ask initialize"
PROBE_ID: Final = 0
"""The probe's request id: outside the ids of later requests (1, 2, ...), so they are what they were without
a probe (the journal and the logs of older servers keep their ids)."""
PROBE_TIMEOUT: Final = 10.0
"""The longest a ``server/discover`` probe waits (bounded by the server's ``connect_timeout`` too)."""


@dataclass(frozen=True, slots=True)
class DiscoverInfo:
    """What a ``DiscoverResult`` says: the versions, capabilities, instructions and (optional) identity."""

    supported: tuple[str, ...]
    capabilities: dict[str, Any]
    instructions: str | None
    server_info: dict[str, Any]


def parse_discover_result(result: dict[str, Any]) -> DiscoverInfo | None:
    """The ``DiscoverResult`` ``result``, or ``None`` when it is not one (no list of versions)."""
    supported = result.get("supportedVersions")
    if not isinstance(supported, list) or not all(isinstance(v, str) for v in supported):
        return None
    capabilities = result.get("capabilities")
    instructions = result.get("instructions")
    meta = result.get("_meta")
    server_info = meta.get("io.modelcontextprotocol/serverInfo") if isinstance(meta, dict) else None
    return DiscoverInfo(
        supported=tuple(supported),
        capabilities=capabilities if isinstance(capabilities, dict) else {},
        instructions=instructions if isinstance(instructions, str) else None,
        server_info=server_info if isinstance(server_info, dict) else {},
    )


@dataclass(frozen=True, slots=True)
class EraChoice:
    """What :func:`choose_era` decided: ``era`` is :data:`MODERN`, :data:`LEGACY`, :data:`ASK_INITIALIZE` (try
    ``initialize``, then choose again with its verdict) or a pinned revision; ``why`` says why, in words."""

    era: str
    why: str


def choose_era(
    *,
    pinned: str | None,
    unsafe: bool,
    tasks: bool,
    http: bool,
    accepts_initialize: bool | None,
    event_ids: bool | None = None,
) -> EraChoice:
    """The era of a server that answered ``server/discover`` at 2026-07-28 (durability first, see the module
    docstring). ``pinned``: the revision ``protocol:`` asks for (None: ``auto``); ``unsafe``: some call on the
    server is not safe to repeat; ``tasks``: the server offers the tasks extension and the calls follow tasks;
    ``http``: Streamable HTTP (else stdio); ``accepts_initialize``: the verdict of an ``initialize`` try (None:
    not tried yet); ``event_ids``: whether the streams read so far (the handshake's) carried event ids (None:
    no SSE stream was read). It only changes what ``why`` says: a 2025-11-25 stream without ids leaves a cut in
    doubt, as 2026-07-28 would, so 2025-11-25 is never the worse choice, and the handshake is already done."""
    if pinned is not None:
        return EraChoice(pinned, f"protocol {pinned} is pinned (--protocol-version or the server's 'protocol:')")
    if not unsafe:
        return EraChoice(MODERN, "every call on it is safe to repeat, so a cut is retried in any era")
    if tasks:
        return EraChoice(
            MODERN, "some calls are not safe to repeat and it offers the tasks extension: a task id survives a cut"
        )
    if not http:
        return EraChoice(MODERN, "over stdio a cut is the server's exit, which no era resumes")
    if accepts_initialize is None:
        return EraChoice(ASK_INITIALIZE, "some calls are not safe to repeat and it offers no tasks extension")
    if accepts_initialize:
        given = "some calls are not safe to repeat, it offers no tasks extension and accepts initialize"
        if event_ids is False:
            return EraChoice(
                LEGACY,
                f"{given}, but its streams carry no event id: a cut may be in doubt in 2025-11-25 too "
                "(as always in 2026-07-28)",
            )
        known = "its streams carry event ids, so " if event_ids else ""
        return EraChoice(
            LEGACY,
            f"{given}: {known}2025-11-25 streams are resumed after a cut (GET with Last-Event-ID), 2026-07-28 "
            "ones cannot be",
        )
    return EraChoice(
        MODERN,
        "some calls are not safe to repeat, it offers no tasks extension and refuses initialize: "
        "a cut of such a call is in doubt (2026-07-28 streams cannot be resumed)",
    )


class _Legacy(Exception):
    """The probe says: an older server; fall back to ``initialize``. ``why`` is what it answered."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _supported(data: Any) -> tuple[str, ...] | None:
    supported = data.get("supported") if isinstance(data, dict) else None
    if isinstance(supported, list) and all(isinstance(v, str) for v in supported):
        return tuple(supported)
    return None


class _RetryWith(Exception):
    """The probe was refused (-32022) for a version while the server names a 2026 one we speak: ask again once."""

    def __init__(self, version: str) -> None:
        super().__init__(version)
        self.version = version


def judge_error(code: int, message: str, data: Any, *, pinned: bool, version: str | None = None) -> None:
    """Judge a JSON-RPC error answer to the probe of ``version``: raise ``_Legacy`` (fall back), ``_RetryWith``
    (a -32022 naming a modern version we speak: the revision says to retry with it; when pinned, only with
    the pinned one) or ``ConnectFailed``."""
    if code == UNSUPPORTED_VERSION:
        _judge_unsupported(_supported(data), pinned=pinned, version=version)
    if code == UNSUPPORTED_VERSION or code in MODERN_ERRORS:
        raise ConnectFailed(f"could not connect: {modern_error(code, message, data, method='server/discover')}")
    raise _Legacy(f"server/discover: server error {code}: {message}")


def _judge_unsupported(supported: tuple[str, ...] | None, *, pinned: bool, version: str | None) -> None:
    """A -32022 listing ``supported``: raise ``_RetryWith`` or ``_Legacy`` when one applies (else the caller
    fails the connection)."""
    if supported is None:
        return
    if version is not None:
        again = _retry_versions(supported, pinned=pinned, version=version)
        if again:
            raise _RetryWith(again[0])
    if not pinned and any(v in LEGACY_VERSIONS for v in supported):
        raise _Legacy(f"it speaks {', '.join(supported)}")


def _retry_versions(supported: tuple[str, ...], *, pinned: bool, version: str) -> list[str]:
    """The modern versions a refusal names that a retry may use (when pinned, only the pinned one)."""
    return [v for v in supported if is_modern(v) and (not pinned or v == version)]


async def negotiate(session: Session) -> None:
    """Choose the session's era (see the module docstring) and open it: adopt the discover result, or run
    the ``initialize`` handshake."""
    options = session.options
    memory = options.era_memory
    choice = options.protocol
    pinned = choice != "auto"
    if not pinned and memory.version == LEGACY:
        await session.initialize()  # an earlier session of this run found an older server: no probe
        return
    if pinned and not is_modern(choice):
        await session.initialize(version=choice)
        return
    remembered = memory.version is not None
    version = choice if pinned else LATEST_MODERN_VERSION
    try:
        try:
            info = await _probe(session, version, pinned=pinned, retry=True)
        except _RetryWith as again:  # once: a second refusal is judged without a retry
            version = again.version
            info = await _probe(session, version, pinned=pinned, retry=False)
    except _Legacy as legacy:
        if pinned:
            raise _pinned_failed(version, legacy.why) from None
        await session.initialize()
        memory.version = LEGACY
        return
    if pinned:
        session.adopt_modern(version, info)
        memory.version = version
        return
    http = session.modern_era(version).http
    tasks = options.tasks_extension and server_takes_tasks(info.capabilities)
    chosen = choose_era(pinned=None, unsafe=options.durable, tasks=tasks, http=http, accepts_initialize=None)
    if chosen.era == ASK_INITIALIZE and not remembered:
        accepts = await _accepts_initialize(session)
        transport = session.transport
        event_ids = transport.event_ids if isinstance(transport, EventIds) else None
        chosen = choose_era(
            pinned=None, unsafe=True, tasks=False, http=http, accepts_initialize=accepts, event_ids=event_ids
        )
        if accepts:
            memory.version = LEGACY
            memory.why = session.era_why = chosen.why
            return
    if chosen.era == ASK_INITIALIZE:  # an earlier session of this run found it refuses initialize
        chosen = EraChoice(MODERN, memory.why or chosen.why)
    session.adopt_modern(version, info)
    memory.version = version
    memory.why = chosen.why
    # Said only where durability could decide: over stdio no era resumes a cut, so there is nothing to explain.
    session.era_why = chosen.why if options.durable and http else None


async def _accepts_initialize(session: Session) -> bool:
    """Run the ``initialize`` handshake on a server that answered ``server/discover``: True when it took it
    (the session is then 2025-11-25), False when it answered with a refusal (a JSON-RPC error, a 4xx, a version
    we do not speak, or no answer within the handshake's bound: the server has answered ``server/discover``, so
    it is up). A connection that fails is no verdict: it fails the connect, as the probe's would."""
    try:
        await session.initialize()
    except ProtocolError:
        return False
    except ConnectFailed as exc:
        cause = exc.__cause__
        if isinstance(cause, CallTimeout):
            return False
        if isinstance(cause, HTTPStatusError) and 400 <= cause.status_code < 500 and cause.status_code != 429:
            return False
        raise
    return True


def _pinned_failed(version: str, why: str) -> ConnectFailed:
    return ConnectFailed(
        f"could not connect: protocol {version} was asked for (--protocol-version or the server's 'protocol:'), "
        f"but the server does not speak it: {why}"
    )


async def _probe(session: Session, version: str, *, pinned: bool, retry: bool) -> DiscoverInfo:
    era = session.modern_era(version)
    timeout = min(PROBE_TIMEOUT, session.options.initialize_timeout)
    try:
        result = await session.request(
            "server/discover", None, timeout=timeout, era=era, handshake=True, request_id=PROBE_ID if retry else None
        )
    except JsonRpcError as exc:
        judge_error(exc.code, exc.message, exc.data, pinned=pinned, version=version if retry else None)
        raise AssertionError("unreachable") from None  # pragma: no cover - judge_error always raises
    except CallTimeout as exc:
        if not era.http:
            raise _Legacy(f"no answer to server/discover within {timeout:g} s") from None
        raise session.connect_failed(exc, f"no answer to server/discover within {timeout:g} s") from exc
    except HTTPStatusError as exc:
        _judge_status(exc, pinned=pinned, version=version if retry else None)
        raise session.connect_failed(exc) from exc
    except TransportError as exc:
        raise session.connect_failed(exc) from exc
    return _judge_discovered(parse_discover_result(result), version, pinned=pinned)


def _judge_status(exc: HTTPStatusError, *, pinned: bool, version: str | None) -> None:
    """An HTTP error answer to the probe: a modern JSON-RPC error in its body is judged as one; another 4xx
    (not 429) means an older server. Returns when the connection fails on the status itself."""
    rpc = exc.rpc_error
    if rpc is not None and rpc[0] in MODERN_ERRORS:
        judge_error(*rpc, pinned=pinned, version=version)
    if 400 <= exc.status_code < 500 and exc.status_code != 429:
        raise _Legacy(f"it answered server/discover with HTTP {exc.status_code}") from None


def _judge_discovered(info: DiscoverInfo | None, version: str, *, pinned: bool) -> DiscoverInfo:
    """The probe's answer, when it supports ``version``; else raise what it means."""
    if info is None:
        raise _Legacy("its answer to server/discover is not a DiscoverResult")
    if version in info.supported:
        return info
    what = ", ".join(info.supported) or "no version"
    if pinned:
        raise _pinned_failed(version, f"it supports {what}")
    if any(v in LEGACY_VERSIONS for v in info.supported):
        raise _Legacy(f"it speaks {what}")  # a discover-answering server that advertises only older versions
    raise ConnectFailed(f"could not connect: the server speaks only {what}, which mcp-run does not")
