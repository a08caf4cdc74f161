"""Run every benchmark, print a table and write ``bench-results/latest.json``.

    .venv/bin/python -m tests.benchmarks            # the full run (about 5 minutes on 2 cores)
    .venv/bin/python -m tests.benchmarks --smoke    # small counts, well under a minute
    .venv/bin/python -m tests.benchmarks --only stdio,http

Sections: ``stdio`` and ``http`` (mcp-run's session against the official SDK client and a raw pipe loop,
calls/s and client CPU per call), ``engine`` (fan-outs through the ``mcp-run`` CLI: wall time, calls/s, peak
RSS, journal on and off; the whole-process comparison of a fan-out with the official SDK's client loop;
planning a 10,000-step DAG; resuming from a 100,000-event journal) and ``startup``.
The ratios and targets of BENCHMARKS.md are computed from the figures of this one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.benchmarks import http_rounds, steps, whole
from tests.benchmarks.common import (
    ECHO,
    MCP_RUN,
    PY,
    REPO,
    fanout_yaml,
    http_server,
    target_row,
    timed_child,
)

SDK_STDIO = [PY, str(REPO / "tests" / "peers" / "sdk_server.py"), "stdio"]

SECTIONS = ("stdio", "http", "engine", "whole", "startup")  # "engine" includes "whole"


@dataclass(frozen=True)
class Sizes:
    stdio_calls: int
    http_calls: int
    fanouts: tuple[int, ...]  # journaled fan-outs; the first is the RSS baseline, the last the big one
    no_journal: tuple[int, ...]
    dag_steps: int
    resume_items: int  # a fan-out of this many items leaves a journal of about twice as many events
    startup_repeats: int
    whole: tuple[int, ...] = ()  # whole-process fan-outs (WHOLE clients, each WHOLE_INFLIGHT); the last is the big one
    whole_rounds: int = 1  # each is run this many times, interleaved; the median is reported, with the spread
    chain_steps: int = 20_000  # a chain of this many steps, next to a fan-out of as many items (steps.py)
    http_rounds: int = 3  # the http section's clients take turns this many times; medians (http_rounds.py)
    whole_http: tuple[int, ...] = ()  # whole-process fan-outs over Streamable HTTP (whole.WHOLE_HTTP clients)
    temporal_items: int = 0  # a fan-out of this many items, local engine then Temporal (whole_rounds times)


FULL = Sizes(
    10_000,
    2_000,
    (1_000, 10_000, 100_000),
    (10_000, 100_000),
    10_000,
    50_000,
    7,
    (2_000, 20_000),
    3,
    whole_http=(2_000, 10_000),
    temporal_items=1_000,
)
SMOKE = Sizes(
    100, 100, (200, 200), (200,), 200, 200, 3, (100, 400), 1, chain_steps=200, http_rounds=1, whole_http=(100,),
    temporal_items=10,
)  # fmt: skip


# -- running things --------------------------------------------------------------------------------


def client_run(client: str, transport: str, target: str, calls: int, inflight: int) -> dict[str, Any]:
    """One client in a process of its own (see clients.py); returns calls, wall_s, cpu_s."""
    argv = [PY, "-m", "tests.benchmarks.clients", client, transport, target, "--calls", str(calls)]
    argv += ["--inflight", str(inflight), "--warmup", str(min(100, calls))]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{client} {transport} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# -- sections --------------------------------------------------------------------------------------


def client_rows(transport: str, server: str, target: str, calls: int, clients: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for inflight in (1, 64):
        for client in clients:
            r = client_run(client, transport, target, calls, inflight)
            row = {
                "section": transport,
                "server": server,
                "client": client,
                "inflight": inflight,
                "calls": r["calls"],
                "wall_s": r["wall_s"],
                "calls_per_s": r["calls"] / r["wall_s"],
                "cpu_us_per_call": r["cpu_s"] / r["calls"] * 1e6,
            }
            rows.append(row)
            print(
                f"  {server:<10} {client:<8} {inflight:>3} in flight  {row['calls_per_s']:>9,.0f} calls/s  "
                f"{row['cpu_us_per_call']:>8.1f} µs CPU/call",
                flush=True,
            )
    return rows


def bench_stdio(sizes: Sizes) -> list[dict[str, Any]]:
    print("stdio", flush=True)
    rows = client_rows("stdio", "minimal", json.dumps(ECHO), sizes.stdio_calls, ("raw", "mcp-run", "sdk"))
    rows += client_rows("stdio", "sdk", json.dumps(SDK_STDIO), sizes.stdio_calls, ("mcp-run", "sdk"))
    return rows


def bench_http(sizes: Sizes) -> list[dict[str, Any]]:
    return http_rounds.bench_http(sizes.http_calls, sizes.http_rounds, http_server)


def fanout_file(tmp: Path, items: int) -> Path:
    path = tmp / f"fanout-{items}.yaml"
    path.write_text(fanout_yaml(ECHO, items))
    return path


def run_fanout(tmp: Path, items: int, *, journal: bool, state: Path | None = None) -> dict[str, Any]:
    path = fanout_file(tmp, items)
    argv = [MCP_RUN, str(path), "--no-progress", "--quiet", "--json", "--concurrency", "64", "--new-run"]
    argv += ["--state-dir", str(state or tmp / f"state-{items}")] if journal else ["--no-journal"]
    wall, code, out, rss = timed_child(argv, cwd=tmp)
    if code != 0:
        raise RuntimeError(f"fan-out of {items} exited {code}")
    summary = json.loads(out)
    assert summary["steps"]["fan"]["succeeded"] == items, summary["steps"]
    run_s = summary["duration_s"]
    return {
        "section": "engine",
        "what": f"fan-out {items:,}" + ("" if journal else " --no-journal"),
        "items": items,
        "journal": journal,
        "wall_s": wall,
        "run_s": run_s,
        "calls_per_s": items / run_s,
        "peak_rss_mib": rss / 1024,
    }


def bench_engine(sizes: Sizes, tmp: Path) -> list[dict[str, Any]]:
    print("engine", flush=True)
    rows = []
    runs = [(n, True) for n in sizes.fanouts] + [(n, False) for n in sizes.no_journal]
    for items, journal in sorted(runs, key=lambda r: (r[0], not r[1])):
        row = run_fanout(tmp, items, journal=journal)
        rows.append(row)
        print(
            f"  {row['what']:<28} {row['wall_s']:>7.2f} s wall  {row['calls_per_s']:>8,.0f} calls/s  "
            f"{row['peak_rss_mib']:>6.1f} MiB peak RSS",
            flush=True,
        )
    rows.append(bench_planning(sizes, tmp))
    rows += bench_resume(sizes, tmp)
    rows += steps.bench_chain(tmp, sizes.chain_steps)
    return rows


def bench_planning(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """runner.workflow.loader.validate on a generated DAG: a chain of layers, each step reading the step before it."""
    n = sizes.dag_steps
    lines = ["version: 1", "servers:", f"  echo: {{command: {json.dumps(ECHO)}}}", "steps:"]
    for i in range(n):
        lines += [f"  s{i}:", "    server: echo", "    tool: echo"]
        if i >= 10:
            lines.append(f'    args: {{text: "${{{{ steps.s{i - 10}.text }}}}"}}')
        else:
            lines.append("    args: {text: start}")
    path = tmp / f"dag-{n}.yaml"
    path.write_text("\n".join(lines) + "\n")
    code = (
        "import sys, time; t = time.perf_counter(); from runner.workflow.loader import validate; "
        "plan = validate(sys.argv[1], require_inputs=False); "
        "print(time.perf_counter() - t, len(plan.steps), len(plan.layers))"
    )
    out = subprocess.run([PY, "-c", code, str(path)], cwd=REPO, capture_output=True, text=True, check=True)
    seconds, steps, layers = out.stdout.split()
    print(f"  planning a {n:,}-step DAG ({layers} layers): {float(seconds):.2f} s", flush=True)
    return {"section": "engine", "what": f"plan {n:,}-step DAG", "steps": int(steps), "wall_s": float(seconds)}


def bench_resume(sizes: Sizes, tmp: Path) -> list[dict[str, Any]]:
    """A fan-out run, its journal cut before the last step; then (a) parse_journal + fold in-process and
    (b) ``mcp-run FILE --resume`` end to end (it folds, decides, calls the last step, finishes)."""
    items = sizes.resume_items
    state = tmp / "state-resume"
    run_fanout(tmp, items, journal=True, state=state)
    (journal,) = (state / "runs").glob("*/journal.jsonl")
    lines = journal.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"type":"step_started","step":"done"' in line)
    journal.write_bytes(b"".join(lines[:cut]))
    code = (
        "import sys, time; t = time.perf_counter(); from runner.engine.journal.reader import fold, parse_journal; "
        "data = open(sys.argv[1], 'rb').read(); events, _ = parse_journal(data); state = fold(events); "
        "print(time.perf_counter() - t, len(events))"
    )
    out = subprocess.run([PY, "-c", code, str(journal)], cwd=REPO, capture_output=True, text=True, check=True)
    seconds, events = out.stdout.split()
    path = fanout_file(tmp, items)
    argv = [MCP_RUN, str(path), "--resume", "--no-progress", "--quiet", "--json", "--state-dir", str(state)]
    wall, code_, out_, rss = timed_child(argv, cwd=tmp)
    if code_ != 0:
        raise RuntimeError(f"resume exited {code_}")
    summary = json.loads(out_)
    assert summary["steps"]["fan"]["reused"] == items and summary["status"] == "succeeded", summary["steps"]
    print(
        f"  fold a {int(events):,}-event journal: {float(seconds):.2f} s; `mcp-run --resume`: {wall:.2f} s wall, "
        f"{rss / 1024:.0f} MiB",
        flush=True,
    )
    return [
        {
            "section": "engine",
            "what": f"parse+fold {int(events):,} events",
            "events": int(events),
            "wall_s": float(seconds),
        },
        {
            "section": "engine",
            "what": f"resume ({int(events):,} events)",
            "events": int(events),
            "wall_s": wall,
            "peak_rss_mib": rss / 1024,
        },
    ]


def bench_startup(sizes: Sizes) -> list[dict[str, Any]]:
    print("startup", flush=True)
    rows = []
    for what, argv in (
        ("mcp-run --version", [MCP_RUN, "--version"]),
        ("mcp-run validate convert_docs.yaml", [MCP_RUN, "validate", "workflows/convert_docs.yaml"]),
    ):
        times = sorted(timed_child(argv, cwd=REPO)[0] for _ in range(sizes.startup_repeats))
        median = times[len(times) // 2]
        rows.append({"section": "startup", "what": what, "wall_s": median, "min_s": times[0]})
        print(f"  {what:<36} {median:.3f} s (median of {len(times)}; min {times[0]:.3f})", flush=True)
    return rows


# -- ratios, targets, output -----------------------------------------------------------------------


def find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def ratios_and_targets(rows: list[dict[str, Any]], sizes: Sizes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    ratios: list[dict[str, Any]] = []
    for section, server in (
        ("stdio", "minimal"),
        ("stdio", "sdk"),
    ):
        for inflight in (1, 64):
            ours = find(rows, section=section, server=server, client="mcp-run", inflight=inflight)
            for other in ("sdk", "raw"):
                theirs = find(rows, section=section, server=server, client=other, inflight=inflight)
                if ours and theirs:
                    ratios.append(
                        {
                            "what": f"{section} {server} {inflight} in flight: mcp-run / {other}",
                            "cpu_per_call": ours["cpu_us_per_call"] / theirs["cpu_us_per_call"],
                            "calls_per_s": ours["calls_per_s"] / theirs["calls_per_s"],
                        }
                    )
    ratios += http_rounds.ratios(rows, find)
    ratios += whole.whole_ratios(rows, sizes)
    targets: list[dict[str, Any]] = []

    def target(name: str, value: float | None, limit: float, unit: str, at_most: bool = True) -> None:
        targets.extend(target_row(name, value, limit, unit, at_most))

    def ratio(what: str) -> float | None:
        r = next((r for r in ratios if r["what"] == what), None)
        return r["cpu_per_call"] if r else None

    target(
        "stdio 64 in flight, minimal server: CPU/call mcp-run / SDK",
        ratio("stdio minimal 64 in flight: mcp-run / sdk"),
        0.25,
        "x",
    )
    target(
        "stdio 64 in flight, minimal server: CPU/call mcp-run / raw",
        ratio("stdio minimal 64 in flight: mcp-run / raw"),
        3.0,
        "x",
    )
    for server in ("sdk-sse", "sdk-json", "minimal"):
        for inflight in (1, 64):
            bar = " (bar 0.5 x)" if inflight == 64 else ""
            target(
                f"http {server} {inflight} in flight: CPU/call mcp-run / SDK{bar}",
                ratio(f"http {server} {inflight} in flight: mcp-run / sdk"),
                0.25,
                "x",
            )
    small, big = sizes.fanouts[0], sizes.fanouts[-1]
    a = find(rows, section="engine", items=small, journal=True)
    b = find(rows, section="engine", items=big, journal=True)
    if a and b and big > small:
        target(f"peak RSS fan-out {big:,} / {small:,}", b["peak_rss_mib"] / a["peak_rss_mib"], 2.0, "x")
    on = find(rows, section="engine", items=big, journal=True)
    off = find(rows, section="engine", items=big, journal=False)
    if on and off:
        target(
            f"fan-out {big:,}: throughput journal on / off",
            on["calls_per_s"] / off["calls_per_s"],
            0.9,
            "x",
            at_most=False,
        )
    targets += whole.whole_targets(rows, sizes)
    targets += steps.chain_targets(rows)
    v = find(rows, section="startup", what="mcp-run --version")
    if v:
        target("mcp-run --version wall time", v["wall_s"], 0.3, "s")
    return ratios, targets


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
    }


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    out = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}, Python {m['python']}, commit {m['commit']}"
        + (" (smoke counts)" if result["smoke"] else ""),
        "",
    ]
    clients = [r for r in result["rows"] if r["section"] == "stdio"]
    if clients:
        out.append("| transport | server | client | in flight | calls | calls/s | client CPU µs/call |")
        out.append("|---|---|---|--:|--:|--:|--:|")
        for r in clients:
            out.append(
                f"| {r['section']} | {r['server']} | {r['client']} | {r['inflight']} | {r['calls']:,} | "
                f"{r['calls_per_s']:,.0f} | {r['cpu_us_per_call']:.1f} |"
            )
        out.append("")
    out += http_rounds.render(result["rows"])
    out += whole.render(result["rows"])
    engine = [r for r in result["rows"] if r["section"] in ("engine", "startup")]
    if engine:
        out.append("| engine / start-up | wall s | calls/s | peak RSS MiB |")
        out.append("|---|--:|--:|--:|")
        for r in engine:
            cps = f"{r['calls_per_s']:,.0f}" if "calls_per_s" in r else ""
            rss = f"{r['peak_rss_mib']:.0f}" if "peak_rss_mib" in r else ""
            out.append(f"| {r['what']} | {r['wall_s']:.3f} | {cps} | {rss} |")
        out.append("")
    if result["ratios"]:
        out.append("| ratio | CPU/call | calls/s |")
        out.append("|---|--:|--:|")
        for r in result["ratios"]:
            cps = f"{r['calls_per_s']:.2f}" if r["calls_per_s"] is not None else ""
            out.append(f"| {r['what']} | {r['cpu_per_call']:.2f} | {cps} |")
        out.append("")
    if result["targets"]:
        out.append("| target | value | limit | met |")
        out.append("|---|--:|--:|---|")
        for t in result["targets"]:
            sign = "≤" if t.get("at_most", True) else "≥"
            out.append(
                f"| {t['target']} | {t['value']:.3f} {t['unit']} | {sign} {t['limit']} {t['unit']} | "
                f"{'yes' if t['met'] else 'NO'} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="small counts (CI): checks that everything runs")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--output", default=str(REPO / "bench-results" / "latest.json"), help="where the JSON goes")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mcp-run-bench-") as tmp:
        if "stdio" in only:
            rows += bench_stdio(sizes)
        if "http" in only:
            rows += bench_http(sizes)
        if "engine" in only or "whole" in only:
            rows += whole.bench_whole(sizes, Path(tmp))
        if "engine" in only:
            rows += bench_engine(sizes, Path(tmp))
        if "startup" in only:
            rows += bench_startup(sizes)
    ratios, targets = ratios_and_targets(rows, sizes)
    result = {
        "machine": machine(),
        "smoke": args.smoke,
        "duration_s": time.perf_counter() - started,
        "rows": rows,
        "ratios": ratios,
        "targets": targets,
    }
    print()
    print(render(result))
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{output} written; {result['duration_s']:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
