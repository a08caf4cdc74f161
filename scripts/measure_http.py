"""Client CPU per tool call over Streamable HTTP: mcp-run's session against the official SDK's client.

    .venv/bin/python scripts/measure_http.py [--calls 1000] [--in-flight 50] [--json-response] [--repeat 1]
        [--server-nodelay]

Starts the official-SDK test peer (tests/peers/sdk_server.py) as a subprocess on 127.0.0.1, then, in
this one process, makes the same ``echo`` calls with each client: ``--calls`` one after another, then
``--calls`` with ``--in-flight`` at once on one session. Each client first connects and warms up (the
handshake and 20 calls, not measured). ``time.process_time()`` around the calls counts the CPU of this
process only (every thread of it), never the server's. mcp-run runs on trio; the SDK's client runs on
asyncio, its default. Prints a Markdown table.

``--server-nodelay`` works around a defect of the peer's server (runner/demo/server.py, shared with the
demo): it creates its listening socket without ``IPPROTO_TCP``, so asyncio does not set ``TCP_NODELAY``
on the connections it accepts, and every response written in two parts on a reused keep-alive connection
waits ~40 ms for the client's delayed ACK. With the flag the server's socket is made with
``IPPROTO_TCP`` (patched in the server process only), which is what the fix will do.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.connect import HttpTarget, open_target  # noqa: E402
from runner.demo.server import LISTENING_RE  # noqa: E402
from runner.session import SessionOptions  # noqa: E402

WARM_UP_CALLS = 20
STARTUP_TIMEOUT = 30.0


@dataclass(frozen=True)
class Measurement:
    client: str
    pattern: str
    calls: int
    wall: float
    cpu: float

    def row(self) -> str:
        return (
            f"| {self.client} | {self.pattern} | {self.calls} | {self.wall:.2f} | {self.calls / self.wall:,.0f} "
            f"| {self.cpu * 1000 / self.calls:.2f} |"
        )


# Runs tests/peers/sdk_server.py with the demo server's socket made with IPPROTO_TCP (see --server-nodelay).
_NODELAY_LAUNCHER = """
import runpy, socket, sys
sys.path.insert(0, sys.argv[1])
import runner.demo.server as demo

def loopback_socket(host, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock

demo._loopback_socket = loopback_socket
script = sys.argv[2]
sys.argv = [script, *sys.argv[3:]]
runpy.run_path(script, run_name="__main__")
"""


@contextmanager
def sdk_server(json_response: bool, nodelay: bool) -> Iterator[str]:
    """The test peer over Streamable HTTP on a free loopback port; yields its URL, kills it on exit."""
    script = str(ROOT / "tests" / "peers" / "sdk_server.py")
    argv = [sys.executable, script, "http", "--port", "0"]
    if nodelay:
        argv = [sys.executable, "-c", _NODELAY_LAUNCHER, str(ROOT), script, "http", "--port", "0"]
    if json_response:
        argv.append("--json-response")
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        stderr = process.stderr
        found: list[str] = []
        lines: list[str] = []

        def read() -> None:  # the server's stderr, drained for as long as it runs
            for raw in stderr:
                line = raw.decode(errors="replace").rstrip()
                lines.append(line)
                match = LISTENING_RE.match(line)
                if match and not found:
                    found.append(match.group(1))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not found:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the SDK server did not start:\n" + "\n".join(lines[-20:]))
            time.sleep(0.01)
        yield found[0]
    finally:
        process.kill()
        process.wait()


async def _measure(
    client: str, pattern: str, calls: int, in_flight: int, call: Callable[[int], Awaitable[None]], gather: Gather
) -> Measurement:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if in_flight == 1:
        for i in range(calls):
            await call(i)
    else:
        await gather(call, calls, in_flight)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return Measurement(client, pattern, calls, wall, cpu)


Gather = Callable[[Callable[[int], Awaitable[None]], int, int], Awaitable[None]]


async def _gather_trio(call: Callable[[int], Awaitable[None]], calls: int, in_flight: int) -> None:
    limiter = trio.CapacityLimiter(in_flight)

    async def one(i: int) -> None:
        async with limiter:
            await call(i)

    async with trio.open_nursery() as nursery:
        for i in range(calls):
            nursery.start_soon(one, i)


async def _gather_asyncio(call: Callable[[int], Awaitable[None]], calls: int, in_flight: int) -> None:
    limiter = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with limiter:
            await call(i)

    async with asyncio.TaskGroup() as group:
        for i in range(calls):
            group.create_task(one(i))


async def measure_mcp_run(url: str, calls: int, in_flight: int) -> list[Measurement]:
    target = HttpTarget(url=url, max_concurrency=in_flight)
    async with open_target(target, SessionOptions(name="measure", server_log_level=None)) as session:

        async def call(i: int) -> None:
            result = await session.call_tool("echo", {"text": f"call {i}"})
            if result.text != f"call {i}":
                raise SystemExit(f"mcp-run: wrong result {result.text!r}")

        for i in range(WARM_UP_CALLS):
            await call(i)
        return [
            await _measure("mcp-run", "sequential", calls, 1, call, _gather_trio),
            await _measure("mcp-run", f"{in_flight} in flight", calls, in_flight, call, _gather_trio),
        ]


async def measure_sdk(url: str, calls: int, in_flight: int) -> list[Measurement]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call(i: int) -> None:
            result = await session.call_tool("echo", {"text": f"call {i}"})
            text = getattr(result.content[0], "text", None)
            if result.is_error or text != f"call {i}":
                raise SystemExit(f"SDK: wrong result {result!r}")

        for i in range(WARM_UP_CALLS):
            await call(i)
        return [
            await _measure("official SDK", "sequential", calls, 1, call, _gather_asyncio),
            await _measure("official SDK", f"{in_flight} in flight", calls, in_flight, call, _gather_asyncio),
        ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=50)
    parser.add_argument("--json-response", action="store_true", help="the server answers with JSON, not SSE")
    parser.add_argument("--repeat", type=int, default=1, help="measure each client this many times, alternating")
    parser.add_argument("--server-nodelay", action="store_true", help="work around the server's missing TCP_NODELAY")
    args = parser.parse_args()
    results: list[Measurement] = []
    with sdk_server(args.json_response, args.server_nodelay) as url:
        for _ in range(args.repeat):
            results += trio.run(measure_mcp_run, url, args.calls, args.in_flight)
            results += asyncio.run(measure_sdk(url, args.calls, args.in_flight))
    mode = "JSON responses" if args.json_response else "SSE responses"
    if args.server_nodelay:
        mode += ", server socket patched for TCP_NODELAY"
    print(f"Streamable HTTP, official-SDK server ({mode}), {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print()
    print("| client | calls | n | wall s | calls/s | client CPU ms/call |")
    print("|---|---|---|---|---|---|")
    for m in results:
        print(m.row())
    return 0


if __name__ == "__main__":
    sys.exit(main())
