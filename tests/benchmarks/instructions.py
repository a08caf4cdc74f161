"""Instructions, not seconds: the fan-out of ``run_whole`` counted by cachegrind, which the machine's load does not
change. For each commit's ``runner/`` (extracted as ``compare`` does), the ``mcp-run`` CLI alone (not the echo
server it starts) runs the fan-out at two sizes, with the journal and without; the difference over the extra items
is the cost per item, and what is left is start-up and the fixed steps.

    .venv/bin/python -m tests.benchmarks.instructions COMMIT [COMMIT ...] [--small 1000] [--big 3000]
        [--inflight 64] [--not-idempotent] [--http] [--journal both|on|off]

``--http``: the fan-out over Streamable HTTP against ``http_echo_server.py`` (a process of its own, not counted).

Needs ``valgrind``. Each run takes about 15x its normal time (a 3,000-item run: 30-60 s).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import tempfile
from pathlib import Path

from tests.benchmarks.common import ECHO, HTTP_ECHO, MCP_RUN, REPO, bytecode_env, fanout_yaml, http_server

IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(
    tmp: Path, env: dict[str, str], items: int, journal: bool, inflight: int, idempotent: bool, server: list[str] | str
) -> int:
    """The instructions of one CLI run of an ``items``-item fan-out against ``server`` (argv or URL)."""
    path = tmp / f"fan-{items}.yaml"
    path.write_text(fanout_yaml(server, items, inflight=inflight, idempotent=idempotent))
    argv = [MCP_RUN, str(path), "--no-progress", "--quiet", "--json", "--concurrency", str(inflight), "--new-run"]
    argv += ["--state-dir", str(tmp / "state")] if journal else ["--no-journal"]
    subprocess.run(argv, cwd=tmp, env=env, capture_output=True, check=True)  # bytecode cached first
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *argv],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = IREFS.search(out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--big", type=int, default=3_000)
    parser.add_argument("--inflight", type=int, default=64, help="the server's max_concurrency (default 64)")
    parser.add_argument(
        "--not-idempotent", action="store_true", help="the fanned-out step is not safe to repeat: dispatches fsynced"
    )
    parser.add_argument(
        "--http", action="store_true", help="over Streamable HTTP, against http_echo_server.py (not counted)"
    )
    parser.add_argument("--journal", choices=("both", "on", "off"), default="both")
    args = parser.parse_args()
    journals = {"both": (False, True), "on": (True,), "off": (False,)}[args.journal]
    with tempfile.TemporaryDirectory(prefix="mcp-run-instructions-") as folder, contextlib.ExitStack() as stack:
        server: list[str] | str = stack.enter_context(http_server(HTTP_ECHO)) if args.http else ECHO
        tmp = Path(folder)
        base = bytecode_env(tmp)
        print(f"{'commit':<12} {'journal':<8} {'per item':>10} {'start-up and fixed steps':>26}")
        for commit in args.commits:
            tree = tmp / f"tree-{commit}"
            tree.mkdir()
            archive = subprocess.run(["git", "archive", commit, "runner"], cwd=REPO, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
            env = {**base, "PYTHONPATH": str(tree)}
            for journal in journals:
                small = instructions(tmp, env, args.small, journal, args.inflight, not args.not_idempotent, server)
                big = instructions(tmp, env, args.big, journal, args.inflight, not args.not_idempotent, server)
                per_item = (big - small) / (args.big - args.small)
                fixed = small - per_item * args.small
                print(
                    f"{commit:<12} {'on' if journal else 'off':<8} {per_item / 1e3:>9.0f}k {fixed / 1e6:>25.0f}M",
                    flush=True,
                )


if __name__ == "__main__":
    main()
