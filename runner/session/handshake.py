"""The MCP handshake's pure parts: what ``initialize`` asks, what its answer must hold, and the error text
when it fails. No I/O: :meth:`runner.session.Session.initialize` sends and waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.errors import ConnectFailed, MalformedMessage, TransportError, UnsupportedProtocolVersion
from runner.protocol.mcp import LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS
from runner.protocol.tasks import CLIENT_TASKS_CAPABILITY
from runner.protocol.tasks2026 import declare as declare_tasks_extension
from runner.session.options import SessionOptions
from runner.session.text import first_line, quote

__all__ = ["ServerHello", "initialize_failed", "initialize_params", "parse_initialize_result"]


def client_capabilities(options: SessionOptions, *, modern: bool = False) -> dict[str, Any]:
    """The client capabilities we declare (in ``initialize``, or with ``modern`` in every 2026-07-28 request's
    ``_meta``): only what we honour: what the answer policy can answer (see :mod:`.answers`),
    ``options.capabilities``, and tasks. In 2025 ``tasks`` (:data:`runner.protocol.tasks.CLIENT_TASKS_CAPABILITY`):
    a 2025 server makes a task only when the request asks for one. In 2026-07-28 the server decides, so the
    tasks extension is declared only when ``options.tasks_extension`` says the caller follows tasks."""
    declared = {**options.answers.client_capabilities(), **options.capabilities}
    if modern:
        return declare_tasks_extension(declared) if options.tasks_extension else declared
    return {**declared, "tasks": dict(CLIENT_TASKS_CAPABILITY)}


def initialize_params(options: SessionOptions, version: str = LATEST_PROTOCOL_VERSION) -> dict[str, Any]:
    """The params of our ``initialize``: ``version`` (the newest we speak unless pinned), the client
    capabilities of ``options`` (:func:`client_capabilities`)."""
    return {
        "protocolVersion": version,
        "capabilities": client_capabilities(options),
        "clientInfo": {"name": options.client_name, "version": options.client_version},
    }


@dataclass(frozen=True, slots=True)
class ServerHello:
    """What the server said about itself in its ``initialize`` result."""

    protocol_version: str
    capabilities: dict[str, Any]
    server_info: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None


def parse_initialize_result(result: dict[str, Any]) -> ServerHello:
    """Check an ``initialize`` result: ``UnsupportedProtocolVersion`` for a version we do not speak,
    ``MalformedMessage`` without a capabilities object. ``serverInfo`` and ``instructions`` are optional."""
    version = result.get("protocolVersion")
    if version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise UnsupportedProtocolVersion(LATEST_PROTOCOL_VERSION, str(version))
    capabilities = result.get("capabilities")
    if not isinstance(capabilities, dict):
        raise MalformedMessage("initialize result has no capabilities object")
    server_info = result.get("serverInfo")
    instructions = result.get("instructions")
    return ServerHello(
        protocol_version=version,
        capabilities=capabilities,
        server_info=server_info if isinstance(server_info, dict) else {},
        instructions=instructions if isinstance(instructions, str) else None,
    )


def initialize_failed(
    name: str,
    exc: TransportError,
    reason: str | None = None,
    *,
    broken: TransportError | None,
    first_invalid: bytes | None,
    on_stdout: bool,
) -> ConnectFailed:
    """``could not initialize: REASON`` for the server ``name``, with its stderr tail and, when it wrote
    something that is not JSON-RPC (``first_invalid``), the first such thing: a server that logs to stdout
    is the usual cause. ``broken`` is how the connection itself ended, if it did; ``on_stdout``: the server
    is a stdio one (the advice names stdout and stderr)."""
    if reason is None:
        # The connection's own end says it best ("server exited with code 1"), better than what that did to
        # the request ("connection lost after initialize request 1 was sent: ...").
        cause = exc.__cause__
        source = broken or (cause if isinstance(cause, TransportError) else exc)
        reason = first_line(source).removeprefix(f"{name}: ")
    text = f"could not initialize: {reason}"
    if first_invalid is not None:
        quoted = quote(first_invalid)
        if on_stdout:
            text += (
                f"; it wrote text that is not JSON-RPC on stdout: {quoted} (an MCP server must write only "
                "protocol messages on stdout; logs go to stderr)"
            )
        else:
            text += f"; it sent something that is not JSON-RPC: {quoted}"
    stderr = exc.stderr or (broken.stderr if broken is not None else None)
    error = ConnectFailed(text, stderr=stderr, retryable=exc.retryable)
    error.server = name
    return error
