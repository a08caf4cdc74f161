"""How a session behaves, and the callbacks its owner hands it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from runner import __version__
from runner.protocol.jsonrpc import RequestId
from runner.protocol.mcp import LogMessage, Progress
from runner.session.answers import AnswerPolicy

__all__ = ["BeforeSend", "LogHandler", "ProgressHandler", "SessionOptions"]

ProgressHandler = Callable[[Progress], None]
"""Called with each ``notifications/progress`` of one call."""
LogHandler = Callable[[LogMessage, "RequestId | None"], None]
"""Called with each ``notifications/message``, and the request it came with when the wire says (HTTP)."""
BeforeSend = Callable[[RequestId, RequestId], Awaitable[None]]
"""Awaited with (request id, progress token) once they are chosen and before a byte is written."""


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How a session behaves. ``server_log_level`` is what ``logging/setLevel`` asks of the server (None:
    do not ask); what the console shows is filtered elsewhere. ``initialize_timeout`` bounds the handshake
    and each page of ``tools/list`` (the server's ``connect_timeout``). ``answers`` is what the server's own
    requests (elicitation, roots, sampling) get; each answer is logged through ``on_log`` (logger ``mcp-run``)."""

    name: str = "server"
    server_log_level: str | None = "info"
    initialize_timeout: float = 30.0
    client_name: str = "mcp-run"
    client_version: str = __version__
    on_log: LogHandler | None = None
    on_warning: Callable[[str], None] | None = None
    answers: AnswerPolicy = field(default_factory=AnswerPolicy)
