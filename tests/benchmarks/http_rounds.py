"""The http section: mcp-run on its lean HTTP client, mcp-run on httpx2, and the official SDK client, in one run.

Each client runs in a process of its own (``clients.py``) against the same server process, at 1 and 64 calls
in flight. The clients take turns inside each round and the rounds repeat, so a drift of the shared machine
touches all of them alike; each row is the median of its rounds, with the lowest and highest value kept as
``spread``. ``mcp-run httpx2`` is mcp-run with ``MCP_RUN_HTTP_CLIENT=httpx2`` (the full client, which it uses
when a proxy is configured); ``mcp-run`` is the default (the lean client).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable

SERVERS = {
    "minimal": [PY, "-m", "tests.benchmarks.http_echo_server"],
    "sdk-sse": [PY, "tests/peers/sdk_server.py", "http", "--port", "0"],
    "sdk-json": [PY, "tests/peers/sdk_server.py", "http", "--port", "0", "--json-response"],
}
CLIENTS = {
    "mcp-run": ("mcp-run", "lean"),
    "mcp-run httpx2": ("mcp-run", "httpx2"),
    "sdk": ("sdk", ""),
}
INFLIGHT = (1, 64)


def run_client(client: str, url: str, calls: int, inflight: int) -> dict[str, Any]:
    """One client process; returns ``calls``, ``wall_s`` and ``cpu_s`` (its CPU over the measured calls)."""
    program, http_client = CLIENTS[client]
    argv = [PY, "-m", "tests.benchmarks.clients", program, "http", url, "--calls", str(calls)]
    argv += ["--inflight", str(inflight), "--warmup", str(min(100, calls))]
    env = dict(os.environ)
    env.pop("MCP_RUN_HTTP_CLIENT", None)
    if http_client:
        env["MCP_RUN_HTTP_CLIENT"] = http_client
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{client} http failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def bench_http(
    calls: int, rounds: int, http_server: Callable[[list[str]], AbstractContextManager[str]]
) -> list[dict[str, Any]]:
    """Rows of the http section: one per server, client and calls in flight (median of ``rounds``)."""
    print(f"http ({rounds} interleaved rounds, medians)", flush=True)
    rows: list[dict[str, Any]] = []
    for server, argv in SERVERS.items():
        samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
        with http_server(argv) as url:
            for _ in range(rounds):
                for inflight in INFLIGHT:
                    for client in CLIENTS:
                        samples.setdefault((client, inflight), []).append(run_client(client, url, calls, inflight))
        for inflight in INFLIGHT:
            for client in CLIENTS:
                rows.append(_row(server, client, inflight, samples[(client, inflight)]))
    return rows


def _row(server: str, client: str, inflight: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    cpu = [r["cpu_s"] / r["calls"] * 1e6 for r in runs]
    rate = [r["calls"] / r["wall_s"] for r in runs]
    row = {
        "section": "http",
        "server": server,
        "client": client,
        "inflight": inflight,
        "calls": runs[0]["calls"],
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "calls_per_s": statistics.median(rate),
        "cpu_us_per_call": statistics.median(cpu),
        "spread": [min(cpu), max(cpu)],
        "rounds": len(runs),
    }
    print(
        f"  {server:<10} {client:<15} {inflight:>3} in flight  {row['calls_per_s']:>9,.0f} calls/s  "
        f"{row['cpu_us_per_call']:>8.1f} µs CPU/call  ({min(cpu):.0f}-{max(cpu):.0f})",
        flush=True,
    )
    return row


def ratios(rows: list[dict[str, Any]], find: Callable[..., dict[str, Any] | None]) -> Iterator[dict[str, Any]]:
    """Each mcp-run client against the SDK's, and the lean client against httpx2, per server and in flight."""
    pairs = (("mcp-run", "sdk"), ("mcp-run httpx2", "sdk"), ("mcp-run", "mcp-run httpx2"))
    for server in SERVERS:
        for inflight in INFLIGHT:
            for ours, theirs in pairs:
                a = find(rows, section="http", server=server, client=ours, inflight=inflight)
                b = find(rows, section="http", server=server, client=theirs, inflight=inflight)
                if a and b:
                    yield {
                        "what": f"http {server} {inflight} in flight: {ours} / {theirs}",
                        "cpu_per_call": a["cpu_us_per_call"] / b["cpu_us_per_call"],
                        "calls_per_s": a["calls_per_s"] / b["calls_per_s"],
                    }


def render(rows: list[dict[str, Any]]) -> list[str]:
    """The http table (markdown lines), with each row's spread over its rounds."""
    http = [r for r in rows if r["section"] == "http"]
    if not http:
        return []
    out = [
        "| transport | server | client | in flight | calls | calls/s | client CPU µs/call | spread (rounds) |",
        "|---|---|---|--:|--:|--:|--:|--:|",
    ]
    for r in http:
        low, high = r["spread"]
        out.append(
            f"| http | {r['server']} | {r['client']} | {r['inflight']} | {r['calls']:,} | {r['calls_per_s']:,.0f} | "
            f"{r['cpu_us_per_call']:.1f} | {low:.0f}-{high:.0f} ({r['rounds']}) |"
        )
    out.append("")
    return out
