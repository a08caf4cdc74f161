"""The whole-process section (``--only whole``): the fan-out of issue 27's comparison as whole processes, next to
the official SDK client making the same calls, and the same file on Temporal next to the local engine.

- **stdio**: the minimal stdio server, 8 and 64 in flight; ``mcp-run FILE`` with the step not declared safe to
  repeat (the case the journal exists for), the same step ``idempotent: true``, ``--no-journal``, and the SDK
  client loop.
- **http**: the minimal Streamable HTTP server (``http_echo_server.py``, one process per size and concurrency,
  shared by the clients and rounds), 8 in flight; ``mcp-run FILE`` (not idempotent) and the SDK's
  ``streamable_http_client`` loop at the same concurrency.
- **temporal**: ``temporal_items.py``'s fan-out, the local engine then Temporal (its dev server and one worker),
  items/s of each and their ratio per round.

Every client starts from cached bytecode and runs ``whole_rounds`` times, the clients interleaved (the machine's
drift falls on all alike); per client the median round is kept, with the spread of its CPU per item.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.benchmarks.common import (
    ECHO,
    HTTP_ECHO,
    MCP_RUN,
    PY,
    REPO,
    bytecode_env,
    fanout_yaml,
    http_server_process,
    median,
    process_cpu,
    target_row,
    timed_child_cpu,
)

if TYPE_CHECKING:
    from tests.benchmarks.__main__ import Sizes

WHOLE = ("mcp-run", "mcp-run idempotent", "mcp-run --no-journal", "sdk")
WHOLE_INFLIGHT = (8, 64)  # the default max_concurrency, and a server that allows more
WHOLE_HTTP = ("mcp-run", "sdk")
WHOLE_HTTP_INFLIGHT = (8,)
PAIRS = {
    "stdio": (
        ("mcp-run", "sdk"),
        ("mcp-run idempotent", "sdk"),
        ("mcp-run --no-journal", "sdk"),
        ("mcp-run", "mcp-run --no-journal"),
    ),
    "http": (("mcp-run", "sdk"),),
}
HttpServer = tuple[str, "subprocess.Popen[bytes]"]


def run_whole(
    tmp: Path, items: int, client: str, env: dict[str, str], inflight: int = 64, http: HttpServer | None = None
) -> dict[str, Any]:
    """One whole process making ``items`` echo calls, ``inflight`` at a time, against the minimal stdio server, or
    over Streamable HTTP against ``http`` (the URL and the process of a running ``http_echo_server.py``).

    Its CPU is ``os.wait4``'s: over stdio that counts the server it reaped, so the server's own (which it writes
    at exit, ``--cpu-file``) is taken off; over HTTP the server is another process, not counted (its CPU during
    the run is kept as ``server_cpu_s``). ``mcp-run``: the fan-out workflow through the CLI (start-up, the
    ``range`` and last steps included), its step not declared safe to repeat (each dispatch durable before its
    call: the default, the case the journal exists for); ``mcp-run idempotent``: the same step
    ``idempotent: true``; ``mcp-run --no-journal``: no journal at all; ``sdk``: the official SDK client loop
    (``clients.py sdk``, no warm-up: start-up included as well)."""
    cpu_file = tmp / f"server-cpu-{items}"
    if http is None:
        cpu_file.unlink(missing_ok=True)
        server: list[str] | str = [*ECHO, "--cpu-file", str(cpu_file)]
    else:
        server, process = http
        server_before = process_cpu(process.pid)
    transport = "stdio" if http is None else "http"
    if client == "sdk":
        target = server if isinstance(server, str) else json.dumps(server)
        argv = [PY, "-m", "tests.benchmarks.clients", "sdk", transport, target, "--calls", str(items)]
        argv += ["--inflight", str(inflight), "--warmup", "0"]
        cwd = REPO
    else:
        path = tmp / f"whole-{items}.yaml"
        path.write_text(fanout_yaml(server, items, inflight=inflight, idempotent=client != "mcp-run"))
        argv = [MCP_RUN, str(path), "--no-progress", "--quiet", "--json", "--concurrency", "64", "--new-run"]
        argv += ["--no-journal"] if client.endswith("--no-journal") else ["--state-dir", str(tmp / "state-whole")]
        cwd = tmp
    wall, code, out, _rss, cpu = timed_child_cpu(argv, cwd=cwd, env=env)
    if code != 0:
        raise RuntimeError(f"{client} ({transport}): {items} calls exited {code}")
    if http is None:
        server_cpu = float(cpu_file.read_text())
        own = cpu - server_cpu
    else:
        server_cpu = process_cpu(process.pid) - server_before
        own = cpu
    if client == "sdk":
        run_s = json.loads(out.strip().splitlines()[-1])["wall_s"]
    else:
        summary = json.loads(out)
        assert summary["steps"]["fan"]["succeeded"] == items, summary["steps"]
        run_s = summary["duration_s"]
    return {
        "section": "whole",
        "transport": transport,
        "client": client,
        "inflight": inflight,
        "items": items,
        "wall_s": wall,
        "calls_per_s": items / run_s,
        "cpu_s": cpu,
        "server_cpu_s": server_cpu,
        "cpu_us_per_item": own / items * 1e6,
    }


def _rounds(clients: tuple[str, ...], rounds: int, run: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """``rounds`` runs of each client, interleaved; per client the median round, its CPU per item the median
    of the rounds', with their spread."""
    runs: dict[str, list[dict[str, Any]]] = {client: [] for client in clients}
    for _ in range(rounds):
        for client in clients:
            runs[client].append(run(client))
    rows = []
    for done in runs.values():
        cpus = [r["cpu_us_per_item"] for r in done]
        row = min(done, key=lambda r: abs(r["cpu_us_per_item"] - median(cpus)))
        row = {**row, "cpu_us_per_item": median(cpus), "spread": (min(cpus), max(cpus)), "rounds": len(done)}
        rows.append(row)
        print(
            f"  {row['transport']:<5} {row['items']:>7,} {row['inflight']:>2} in flight {row['client']:<22} "
            f"{row['wall_s']:>6.2f} s wall  {row['calls_per_s']:>8,.0f} calls/s  {row['cpu_us_per_item']:>7.1f} "
            f"µs CPU/item ({min(cpus):.1f}-{max(cpus):.1f}, {len(cpus)} runs)",
            flush=True,
        )
    return rows


def bench_whole(sizes: Sizes, tmp: Path) -> list[dict[str, Any]]:
    """The stdio rows at each size and concurrency, the HTTP rows, then the Temporal row."""
    if not sizes.whole:
        return []
    print("whole process (server CPU subtracted)", flush=True)
    env = bytecode_env(tmp)
    for client in WHOLE:  # a small run of each fills the bytecode cache
        run_whole(tmp, 10, client, env)
    rows: list[dict[str, Any]] = []
    for items in sizes.whole:
        for inflight in WHOLE_INFLIGHT:
            rows += _rounds(WHOLE, sizes.whole_rounds, lambda c, n=items, k=inflight: run_whole(tmp, n, c, env, k))
    if sizes.whole_http:
        with http_server_process(HTTP_ECHO) as http:
            for client in WHOLE_HTTP:
                run_whole(tmp, 10, client, env, http=http)
        for items in sizes.whole_http:
            for inflight in WHOLE_HTTP_INFLIGHT:
                with http_server_process(HTTP_ECHO) as http:
                    rows += _rounds(
                        WHOLE_HTTP,
                        sizes.whole_rounds,
                        lambda c, n=items, k=inflight, h=http: run_whole(tmp, n, c, env, k, h),
                    )
    rows += bench_temporal(sizes, tmp, env)
    return rows


def bench_temporal(sizes: Sizes, tmp: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """``temporal_items.py``'s fan-out of ``temporal_items`` calls: the local engine then Temporal, ``whole_rounds``
    times; a row per engine (medians), with each round's ratio of Temporal's items/s to the local engine's.
    Skipped, with a line saying why, where the temporal extra is not installed."""
    if not sizes.temporal_items:
        return []
    try:
        from runner.temporal.devserver import find_temporal

        find_temporal()
    except Exception as exc:  # the extra missing: ImportError, or UsageError naming it
        print(f"  temporal: skipped ({exc})", flush=True)
        return []
    from tests.benchmarks import temporal_items

    folder = tmp / "temporal"
    folder.mkdir(exist_ok=True)
    path = temporal_items.workflow(folder, sizes.temporal_items)
    temporal_items.warm_bytecode(env)
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "temporal": []}
    ratios = []
    for n in range(sizes.whole_rounds):
        lo = temporal_items.local(path, sizes.temporal_items, folder / "state", env)
        te = temporal_items.on_temporal(path, sizes.temporal_items, folder / f"temporal-{n}", None, env=env)
        runs["local"].append(lo)
        runs["temporal"].append(te)
        ratios.append(float(te["items_per_s"]) / float(lo["items_per_s"]))
    rows = []
    for engine, done in runs.items():
        rate = [float(r["items_per_s"]) for r in done]
        cpu = [_temporal_cpu_ms(r) for r in done]
        row = {
            "section": "temporal",
            "engine": engine,
            "items": sizes.temporal_items,
            "wall_s": median([float(r["wall_s"]) for r in done]),
            "items_per_s": median(rate),
            "cpu_ms_per_item": median(cpu),
            "spread": (min(rate), max(rate)),
            "rounds": len(done),
            "ratios": ratios,
        }
        rows.append(row)
        print(
            f"  temporal {sizes.temporal_items:>6,} items {engine:<9} {row['wall_s']:>6.2f} s wall  "
            f"{row['items_per_s']:>6,.0f} items/s ({min(rate):,.0f}-{max(rate):,.0f})  "
            f"{row['cpu_ms_per_item']:.2f} ms CPU/item",
            flush=True,
        )
    print(f"  temporal / local items/s per round: {', '.join(f'{r:.2f}' for r in ratios)}", flush=True)
    return rows


def _temporal_cpu_ms(run: dict[str, Any]) -> float:
    """CPU per item of one engine's run: mcp-run's processes, and Temporal's server on Temporal."""
    if run["engine"] == "local":
        return float(run["cpu_ms_per_item"])
    parts = ("temporal_server_cpu_ms_per_item", "worker_cpu_ms_per_item", "cli_cpu_ms_per_item")
    return sum(float(run[p]) for p in parts)


def _find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def _marginal(rows: list[dict[str, Any]], small: int, big: int, **match: Any) -> float | None:
    """CPU per item between the ``small`` and ``big`` fan-outs of the row ``match`` names."""
    a = _find(rows, section="whole", items=small, **match)
    b = _find(rows, section="whole", items=big, **match)
    if not (a and b):
        return None
    return float(b["cpu_us_per_item"] * big - a["cpu_us_per_item"] * small) / (big - small)


def whole_ratios(rows: list[dict[str, Any]], sizes: Sizes) -> list[dict[str, Any]]:
    """Whole-process fan-outs: each client against the others, per transport, size and concurrency (CPU per item
    and calls/s), the marginal CPU per item between the smallest and the largest size (start-up cancels out),
    and Temporal against the local engine (CPU per item, and the median of the rounds' items/s ratios)."""
    out: list[dict[str, Any]] = []
    for transport, counts, inflights in (
        ("stdio", sizes.whole, WHOLE_INFLIGHT),
        ("http", sizes.whole_http, WHOLE_HTTP_INFLIGHT),
    ):
        name = "" if transport == "stdio" else f" ({transport})"
        for inflight in inflights:
            kind = {"transport": transport, "inflight": inflight}
            for items in counts:
                for ours, theirs in PAIRS[transport]:
                    a = _find(rows, section="whole", items=items, client=ours, **kind)
                    b = _find(rows, section="whole", items=items, client=theirs, **kind)
                    if a and b:
                        out.append(
                            {
                                "what": f"fan-out {items:,}{name}, {inflight} in flight, whole process: "
                                f"{ours} / {theirs}",
                                "cpu_per_call": a["cpu_us_per_item"] / b["cpu_us_per_item"],
                                "calls_per_s": a["calls_per_s"] / b["calls_per_s"],
                            }
                        )
            if len(counts) < 2:
                continue
            small, big = counts[0], counts[-1]
            for ours, theirs in PAIRS[transport]:
                x = _marginal(rows, small, big, client=ours, **kind)
                y = _marginal(rows, small, big, client=theirs, **kind)
                if x is not None and y is not None and y > 0:
                    out.append(
                        {
                            "what": f"fan-out {small:,} -> {big:,}{name}, {inflight} in flight, marginal CPU per "
                            f"item: {ours} / {theirs}",
                            "cpu_per_call": x / y,
                            "calls_per_s": None,
                        }
                    )
    local = _find(rows, section="temporal", engine="local")
    temporal = _find(rows, section="temporal", engine="temporal")
    if local and temporal:
        out.append(
            {
                "what": f"fan-out {local['items']:,}: Temporal / local engine (items/s: median of the rounds' ratios)",
                "cpu_per_call": temporal["cpu_ms_per_item"] / local["cpu_ms_per_item"],
                "calls_per_s": median(temporal["ratios"]),
            }
        )
    return out


def whole_targets(rows: list[dict[str, Any]], sizes: Sizes) -> list[dict[str, Any]]:
    """Issue 27's targets on the largest fan-out of each kind."""
    targets: list[dict[str, Any]] = []
    if sizes.whole:
        n = sizes.whole[-1]
        for inflight in WHOLE_INFLIGHT:
            on = _find(rows, section="whole", transport="stdio", items=n, inflight=inflight, client="mcp-run")
            off = _find(
                rows, section="whole", transport="stdio", items=n, inflight=inflight, client="mcp-run --no-journal"
            )
            sdk = _find(rows, section="whole", transport="stdio", items=n, inflight=inflight, client="sdk")
            what = f"{n:,}-item fan-out not safe to repeat, {inflight} in flight"
            if on and sdk:
                targets += target_row(
                    f"{what}, whole process: CPU/item mcp-run / SDK loop (bar 0.35 x)",
                    on["cpu_us_per_item"] / sdk["cpu_us_per_item"],
                    0.25,
                    "x",
                )
            if on and off and inflight == 64:
                targets += target_row(
                    f"{what}, whole process: CPU/item journal on / off",
                    on["cpu_us_per_item"] / off["cpu_us_per_item"],
                    1.3,
                    "x",
                )
                targets += target_row(
                    f"{what}: throughput journal on / off", on["calls_per_s"] / off["calls_per_s"], 0.8, "x", False
                )
    if sizes.whole_http:
        n = sizes.whole_http[-1]
        for inflight in WHOLE_HTTP_INFLIGHT:
            on = _find(rows, section="whole", transport="http", items=n, inflight=inflight, client="mcp-run")
            sdk = _find(rows, section="whole", transport="http", items=n, inflight=inflight, client="sdk")
            if on and sdk:
                targets += target_row(
                    f"{n:,}-item fan-out not safe to repeat over Streamable HTTP, {inflight} in flight, whole "
                    "process: CPU/item mcp-run / SDK client",
                    on["cpu_us_per_item"] / sdk["cpu_us_per_item"],
                    0.25,
                    "x",
                )
    temporal = _find(rows, section="temporal", engine="temporal")
    if temporal:
        targets += target_row(
            f"{temporal['items']:,}-item fan-out: throughput Temporal / local engine (median of the rounds)",
            median(temporal["ratios"]),
            0.7,
            "x",
            False,
        )
    return targets


def render(rows: list[dict[str, Any]]) -> list[str]:
    """The whole-process table and the Temporal one (markdown lines)."""
    out: list[str] = []
    whole = [r for r in rows if r["section"] == "whole"]
    if whole:
        out.append(
            "| fan-out, whole process | over | in flight | items | wall s | calls/s | client CPU µs/item | spread |"
        )
        out.append("|---|---|--:|--:|--:|--:|--:|--:|")
        for r in whole:
            low, high = r["spread"]
            out.append(
                f"| {r['client']} | {r['transport']} | {r['inflight']} | {r['items']:,} | {r['wall_s']:.2f} | "
                f"{r['calls_per_s']:,.0f} | {r['cpu_us_per_item']:.1f} | {low:.1f}-{high:.1f} ({r['rounds']}) |"
            )
        out.append("")
    temporal = [r for r in rows if r["section"] == "temporal"]
    if temporal:
        out.append("| fan-out, engine | items | wall s | items/s | spread | CPU ms/item |")
        out.append("|---|--:|--:|--:|--:|--:|")
        for r in temporal:
            low, high = r["spread"]
            out.append(
                f"| {r['engine']} | {r['items']:,} | {r['wall_s']:.2f} | {r['items_per_s']:,.0f} | "
                f"{low:,.0f}-{high:,.0f} ({r['rounds']}) | {r['cpu_ms_per_item']:.2f} |"
            )
        out.append("")
    return out
