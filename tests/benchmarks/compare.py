"""Before and after in one run: the whole-process fan-out (see ``run_whole`` in ``whole``) of several commits'
``runner/``, rounds interleaved, so that the machine's drift falls on every commit alike.

    .venv/bin/python -m tests.benchmarks.compare COMMIT [COMMIT ...] [--items 20000] [--rounds 3]
        [--clients "mcp-run,mcp-run idempotent,mcp-run --no-journal,sdk"] [--inflight 8] [--http]

Each commit's ``runner/`` is extracted with ``git archive`` into a temporary folder and put first on
``PYTHONPATH`` (the venv's ``mcp-run`` then runs that code); the benchmark harness and the echo server are this
checkout's. The SDK loop runs once per round. Prints each run, then the medians (with the spread) and the
ratios of each commit to the first, and of each to the SDK loop.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.benchmarks.common import HTTP_ECHO, REPO, bytecode_env, http_server_process
from tests.benchmarks.whole import run_whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="mcp-run,mcp-run idempotent,mcp-run --no-journal,sdk")
    parser.add_argument("--inflight", type=int, default=64, help="calls in flight (the server's max_concurrency)")
    parser.add_argument("--http", action="store_true", help="over Streamable HTTP (http_echo_server.py, one process)")
    args = parser.parse_args()
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    ours = [c for c in clients if c != "sdk"]
    with tempfile.TemporaryDirectory(prefix="mcp-run-compare-") as folder, contextlib.ExitStack() as stack:
        tmp = Path(folder)
        http = stack.enter_context(http_server_process(HTTP_ECHO)) if args.http else None
        base = bytecode_env(tmp)
        envs: dict[str, dict[str, str]] = {}
        for commit in args.commits:
            tree = tmp / f"tree-{commit}"
            tree.mkdir()
            archive = subprocess.run(["git", "archive", commit, "runner"], cwd=REPO, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
            envs[commit] = {**base, "PYTHONPATH": str(tree)}
        runs: list[tuple[str, str]] = [(c, m) for c in args.commits for m in ours]
        if "sdk" in clients:
            runs.append(("sdk", "sdk"))
        for commit, client in runs:  # bytecode cached, as for an installed program
            run_whole(tmp, 10, client, envs.get(commit, base), args.inflight, http)
        found: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for round_ in range(args.rounds):
            for commit, client in runs:
                row = run_whole(tmp, args.items, client, envs.get(commit, base), args.inflight, http)
                found.setdefault((commit, client), []).append(row)
                print(
                    f"round {round_}: {commit} {client}: {row['cpu_us_per_item']:.1f} µs/item, "
                    f"{row['calls_per_s']:,.0f} calls/s",
                    flush=True,
                )

    def median(commit: str, client: str, field: str) -> float:
        return float(statistics.median(r[field] for r in found[(commit, client)]))

    print(f"\n{args.items:,} items, {args.rounds} rounds: client CPU per item, median (spread); calls/s")
    for (commit, client), rows in found.items():
        cpu = [r["cpu_us_per_item"] for r in rows]
        print(
            f"  {commit:<12} {client:<22} {statistics.median(cpu):8.1f} µs ({min(cpu):.1f}-{max(cpu):.1f})  "
            f"{median(commit, client, 'calls_per_s'):8,.0f} calls/s"
        )
    first = args.commits[0]
    for commit in args.commits[1:]:
        for client in ours:
            ratio = median(commit, client, "cpu_us_per_item") / median(first, client, "cpu_us_per_item")
            print(f"  {client}: {commit} / {first}: {ratio:.3f}")
    if "sdk" in clients:
        sdk = median("sdk", "sdk", "cpu_us_per_item")
        for commit in args.commits:
            for client in ours:
                print(f"  {commit} {client} / SDK loop: {median(commit, client, 'cpu_us_per_item') / sdk:.3f}")
    off = "mcp-run --no-journal"
    if "mcp-run" in ours and off in ours:
        for commit in args.commits:
            on_cpu = median(commit, "mcp-run", "cpu_us_per_item") / median(commit, off, "cpu_us_per_item")
            on_cps = median(commit, "mcp-run", "calls_per_s") / median(commit, off, "calls_per_s")
            print(f"  {commit} journal on / off: CPU {on_cpu:.3f}, calls/s {on_cps:.3f}")


if __name__ == "__main__":
    main()
