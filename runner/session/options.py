"""How a session behaves, and the callbacks its owner hands it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner import __version__
from runner.protocol.jsonrpc import RequestId
from runner.protocol.mcp import LogMessage, Progress
from runner.session.answers import AnswerPolicy
from runner.session.era import EraMemory
from runner.transports.base import Gate

__all__ = [
    "BeforeSend",
    "Gate",
    "LogHandler",
    "ProgressHandler",
    "RequestInfo",
    "RequestTracer",
    "SessionOptions",
    "TracedRequest",
]

ProgressHandler = Callable[[Progress], None]
"""Called with each ``notifications/progress`` of one call."""
LogHandler = Callable[[LogMessage, "RequestId | None"], None]
"""Called with each ``notifications/message``, and the request it came with when the wire says (HTTP)."""
BeforeSend = Callable[[RequestId, RequestId], Awaitable["Gate | None"]]
"""Awaited with (request id, progress token) once they are chosen and before a byte is written. It may return
a :class:`~runner.transports.base.Gate`: the request's first byte is then written only once it opens (the
dispatch record durable), so the caller need not wait for it here, and parks once, for the outcome."""


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """One JSON-RPC request as a tracer sees it, before it is stamped and written: ``transport`` is ``pipe``
    (stdio, memory) or ``tcp`` (HTTP), as OpenTelemetry's ``network.transport`` says; ``session_id`` the HTTP
    session's ``Mcp-Session-Id`` (None over stdio, or in 2026-07-28)."""

    server: str
    method: str
    request_id: RequestId
    params: Mapping[str, Any] | None
    protocol_version: str | None
    session_id: str | None
    transport: str


class TracedRequest(Protocol):
    """A request under way, as its tracer follows it."""

    @property
    def meta(self) -> Mapping[str, str]:
        """What goes into the request's ``params._meta`` (``traceparent``, ``tracestate``: SEP-414)."""
        ...

    def answered(self, result: Mapping[str, Any]) -> None:
        """The server's result arrived (an error raised inside the tracer's context is the other end)."""
        ...


RequestTracer = Callable[[RequestInfo], AbstractContextManager[TracedRequest]]
"""Entered around each request sent (each attempt: a request sent again has an id of its own), exited with
the error it raised, if any (:mod:`runner.engine.telemetry`: a client span per request)."""


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How a session behaves. ``server_log_level`` is what ``logging/setLevel`` asks of the server (None:
    do not ask); what the console shows is filtered elsewhere. ``initialize_timeout`` bounds the handshake
    and each page of ``tools/list`` (the server's ``connect_timeout``). ``protocol`` is ``auto`` (probe
    2026-07-28, fall back to the handshake) or an exact revision (see :mod:`.negotiate`); ``era_memory`` keeps
    what was found for the sessions opened later with the same options. ``capabilities`` are the client
    capabilities declared (in ``initialize``, or in every 2026-07-28 request's ``_meta``), beside what the
    answer policy honours and tasks (:func:`.handshake.client_capabilities`). ``durable``: some call on this
    server is not safe to repeat, so ``auto`` chooses the era in which a cut of it survives
    (:func:`.negotiate.choose_era`).
    ``answers`` is what the server's own requests (elicitation, roots, sampling) get; each answer is logged
    through ``on_log`` (logger ``mcp-run``)."""

    name: str = "server"
    server_log_level: str | None = "info"
    initialize_timeout: float = 30.0
    client_name: str = "mcp-run"
    client_version: str = __version__
    on_log: LogHandler | None = None
    on_warning: Callable[[str], None] | None = None
    answers: AnswerPolicy = field(default_factory=AnswerPolicy)
    protocol: str = "auto"
    era_memory: EraMemory = field(default_factory=EraMemory, compare=False)
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    durable: bool = False
    tasks_extension: bool = False  # declare the 2026-07-28 tasks extension: only a caller that follows tasks
    tracer: RequestTracer | None = field(default=None, compare=False)  # OpenTelemetry, when a run is traced
