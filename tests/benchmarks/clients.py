"""One client run, in a process of its own so that its CPU time is its own (the server is a child process,
or another process altogether over HTTP).

    python -m tests.benchmarks.clients CLIENT TRANSPORT TARGET --calls N --inflight K

``CLIENT`` is ``mcp-run`` (``runner.connect.open_target`` + ``Session.call_tool``), ``sdk`` (the official
SDK: ``stdio_client`` or ``streamable_http_client`` + ``ClientSession.call_tool``) or ``raw`` (a bare pipe loop,
stdio only: write a JSON line, read a JSON line). ``TARGET`` is the server's argv as a JSON list (stdio) or
its URL (http). After the handshake and a warm-up of ``--warmup`` calls, ``N`` calls of the ``echo`` tool run
through ``K`` concurrent workers; one JSON line goes to stdout: ``{"calls", "wall_s", "cpu_s"}`` where
``cpu_s`` is ``time.process_time()`` of this process over the measured calls only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

Measure = tuple[float, float]


def _arguments(i: int) -> dict[str, Any]:
    return {"text": f"hello {i}"}


async def _mcp_run(transport: str, target: str, calls: int, inflight: int, warmup: int) -> Measure:
    import trio

    from runner.connect import HttpTarget, StdioTarget, open_target
    from runner.session import SessionOptions

    where = (
        StdioTarget(command=json.loads(target))
        if transport == "stdio"
        else HttpTarget(url=target, max_concurrency=inflight)
    )
    async with open_target(where, SessionOptions(name="bench", server_log_level=None)) as session:

        async def batch(n: int) -> None:
            numbers = iter(range(n))

            async def worker() -> None:
                for i in numbers:
                    result = await session.call_tool("echo", _arguments(i))
                    if result.is_error or result.text != f"hello {i}":
                        raise AssertionError(f"unexpected result {result.raw!r}")

            async with trio.open_nursery() as nursery:
                for _ in range(min(inflight, n)):
                    nursery.start_soon(worker)

        return await _measured(batch, calls, warmup)


async def _sdk(transport: str, target: str, calls: int, inflight: int, warmup: int) -> Measure:
    import anyio
    from mcp.client.session import ClientSession

    async def run(read: Any, write: Any) -> Measure:
        async with ClientSession(read, write) as session:
            await session.initialize()

            async def batch(n: int) -> None:
                numbers = iter(range(n))

                async def worker() -> None:
                    for i in numbers:
                        result = await session.call_tool("echo", _arguments(i))
                        if result.is_error or result.content[0].text != f"hello {i}":  # type: ignore[union-attr]
                            raise AssertionError(f"unexpected result {result!r}")

                async with anyio.create_task_group() as tg:
                    for _ in range(min(inflight, n)):
                        tg.start_soon(worker)

            return await _measured(batch, calls, warmup)

    if transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        argv = json.loads(target)
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        errlog = open(os.devnull, "w")  # noqa: ASYNC230, SIM115 - once, before anything runs
        async with stdio_client(params, errlog=errlog) as (read, write):
            return await run(read, write)
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(target) as (read, write):
        return await run(read, write)


async def _measured(batch: Callable[[int], Awaitable[None]], calls: int, warmup: int) -> Measure:
    if warmup:
        await batch(warmup)
    wall, cpu = time.perf_counter(), time.process_time()
    await batch(calls)
    return time.perf_counter() - wall, time.process_time() - cpu


def _raw(target: str, calls: int, inflight: int, warmup: int) -> Measure:
    """The physical limit: a blocking pipe, one ``json.dumps`` and one ``json.loads`` per call, ``inflight``
    requests kept outstanding."""
    proc = subprocess.Popen(json.loads(target), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    fd, reader = proc.stdin.fileno(), proc.stdout
    dumps, loads = json.dumps, json.loads

    def send(i: int) -> None:
        data = dumps(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": _arguments(i)}}
        )
        os.write(fd, data.encode() + b"\n")

    def batch(n: int) -> None:
        sent = 0
        while sent < min(inflight, n):
            send(sent)
            sent += 1
        for _ in range(n):
            reply = loads(reader.readline())
            if "result" not in reply:
                raise AssertionError(f"unexpected reply {reply!r}")
            if sent < n:
                send(sent)
                sent += 1

    try:
        if warmup:
            batch(warmup)
        wall, cpu = time.perf_counter(), time.process_time()
        batch(calls)
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        proc.stdin.close()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=("mcp-run", "sdk", "raw"))
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("target")
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--inflight", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    if args.client == "raw":
        wall, cpu = _raw(args.target, args.calls, args.inflight, args.warmup)
    elif args.client == "mcp-run":
        import trio

        wall, cpu = trio.run(_mcp_run, args.transport, args.target, args.calls, args.inflight, args.warmup)
    else:
        import anyio

        wall, cpu = anyio.run(_sdk, args.transport, args.target, args.calls, args.inflight, args.warmup)
    print(json.dumps({"calls": args.calls, "wall_s": wall, "cpu_s": cpu}), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
