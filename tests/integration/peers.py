"""Where the real peers live and how to start them (see peers/package.json and tests/peers/).

HTTP servers are started as subprocesses on port 0, on 127.0.0.1 only, and report the address they got
on a line of stderr; :func:`serve_http` waits for that line (bounded), never for a fixed time, and kills
the server on exit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from runner._trio import single_error
from runner.demo.server import LISTENING_RE

ROOT = Path(__file__).resolve().parents[2]
SDK_SERVER = ROOT / "tests" / "peers" / "sdk_server.py"
PEERS = ROOT / "peers" / "node_modules"
NODE22 = PEERS / ".bin" / "node"
EVERYTHING = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
CONFORMANCE = PEERS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
LOOPBACK_PRELOAD = ROOT / "tests" / "peers" / "loopback.cjs"

#: The line tests/peers/loopback.cjs prints once a node server listens.
LOOPBACK_RE = re.compile(r"^MCP-RUN-LOOPBACK listening on (127\.0\.0\.1:\d+)$")

STARTUP_TIMEOUT = 30.0


def everything_command(transport: str) -> list[str] | None:
    """argv for server-everything, or None when the npm peers are not installed. Over HTTP a preloaded
    script forces its listen() onto 127.0.0.1 (it binds all interfaces by default)."""
    if not EVERYTHING.is_file():
        return None
    node = str(NODE22) if NODE22.exists() else "node"
    argv = [node]
    if transport != "stdio":
        argv += ["-r", str(LOOPBACK_PRELOAD)]
    return [*argv, str(EVERYTHING), transport]


def require_peers() -> bool:
    """CI must not skip integration tests silently: MCP_RUN_REQUIRE_PEERS=1 turns a skip into a failure."""
    return os.environ.get("MCP_RUN_REQUIRE_PEERS") == "1"


def missing_peer(message: str) -> None:
    """Skip the test (or fail it, under MCP_RUN_REQUIRE_PEERS=1): a peer it needs is not installed."""
    if require_peers():
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class RunningServer:
    """A server subprocess that is accepting connections at ``url``."""

    url: str
    process: trio.Process
    stderr: list[str] = field(default_factory=list)  # its stderr lines so far, for failure messages

    def output(self) -> str:
        return "\n".join(self.stderr[-40:])


class _Lines:
    """Lines from a byte stream (a subprocess's stderr)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def next(self) -> str | None:
        """The next line, without its end; None at end of stream."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line.decode(errors="replace").rstrip("\r")
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line.decode(errors="replace")
                return None
            self._buffer += chunk


@asynccontextmanager
async def serve_http(
    argv: Sequence[str],
    url_from_line: Callable[[str], str | None],
    *,
    env: Mapping[str, str] | None = None,
    startup_timeout: float = STARTUP_TIMEOUT,
) -> AsyncIterator[RunningServer]:
    """Start ``argv``, wait (at most ``startup_timeout`` seconds) for the stderr line from which
    ``url_from_line`` reads the endpoint, yield the running server; kill it on exit. Its stdout is
    discarded and its stderr kept draining, so a chatty server never blocks on a full pipe."""
    process = await trio.lowlevel.open_process(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    try:
        assert process.stderr is not None
        lines = _Lines(process.stderr)
        seen: list[str] = []
        url: str | None = None
        with trio.move_on_after(startup_timeout):
            while url is None:
                line = await lines.next()
                if line is None:
                    break
                seen.append(line)
                url = url_from_line(line)
        if url is None:
            tail = "\n".join(seen[-40:])
            raise RuntimeError(f"{argv[0]} did not report a listening address within {startup_timeout:g} s:\n{tail}")
        server = RunningServer(url, process, seen)

        async def drain() -> None:
            while (line := await lines.next()) is not None:
                seen.append(line)

        with single_error():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                yield server
                nursery.cancel_scope.cancel()
    finally:
        process.kill()
        with trio.move_on_after(10, shield=True):
            await process.wait()


def sdk_http_command(*extra: str) -> list[str]:
    """argv for the official-SDK test peer over Streamable HTTP on a free loopback port."""
    return [sys.executable, str(SDK_SERVER), "http", "--host", "127.0.0.1", "--port", "0", *extra]


def _sdk_url(line: str) -> str | None:
    match = LISTENING_RE.match(line)
    return match.group(1) if match else None


def _loopback_url(line: str) -> str | None:
    match = LOOPBACK_RE.match(line)
    return f"http://{match.group(1)}/mcp" if match else None


@asynccontextmanager
async def sdk_http_server(*extra: str) -> AsyncIterator[RunningServer]:
    """The official-SDK test peer over Streamable HTTP (``extra``: ``--resumable``, ``--json-response``,
    ``--retry-interval MS``, ``--count-file F``)."""
    async with serve_http(sdk_http_command(*extra), _sdk_url) as server:
        yield server


@asynccontextmanager
async def everything_http_server(*, port: int = 0) -> AsyncIterator[RunningServer]:
    """server-everything over Streamable HTTP on 127.0.0.1 (PORT=0: a free port, which the preload reports;
    a given port to start it again where it was)."""
    command = everything_command("streamableHttp")
    if command is None:
        missing_peer("server-everything is not installed: run scripts/setup.sh")
        raise AssertionError("unreachable")
    env = {**os.environ, "PORT": str(port)}
    async with serve_http(command, _loopback_url, env=env) as server:
        yield server
