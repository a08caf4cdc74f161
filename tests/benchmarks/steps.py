"""Many steps, not only many items: chains and wide DAGs of trivial steps.

    .venv/bin/python -m tests.benchmarks.steps                  # 1k, 5k, 20k, 60k steps
    .venv/bin/python -m tests.benchmarks.steps --sizes 1000,5000 --shapes chain --only validate,run

Each measurement runs in a fresh process: ``validate`` (the loader, in process, imports included), ``plan``
(``mcp-run plan FILE``) and ``run`` (``mcp-run FILE --no-progress --quiet --json``, journal on, against the
minimal stdio server). It reports wall time, CPU time (``ru_utime + ru_stime`` of the process and the children
it reaped: the echo server is counted, as in a fan-out's row) and peak RSS (``ru_maxrss``).

Shapes: ``chain`` (step i reads step i-1's text), ``wide`` (layers of 100 steps, each reading one step of the
layer before), ``fanout`` (one step of as many items, for the ratio: CPU per step over CPU per item). Every
call is marked ``idempotent``, as in the engine benchmark's fan-outs, so that the journal's durability rules
are the same for both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.common import ECHO, MCP_RUN, PY, REPO, fanout_yaml

WIDTH = 100  # steps per layer of a wide DAG

VALIDATE = (
    "import sys, time; t = time.perf_counter(); from runner.workflow.loader import validate; "
    "plan = validate(sys.argv[1], require_inputs=False); "
    "print(time.perf_counter() - t, len(plan.steps), len(plan.layers))"
)


def workflow_text(shape: str, steps: int) -> str:
    """A workflow of ``steps`` trivial ``echo`` steps against the minimal stdio server (``fanout``: one step of
    ``steps`` items: the whole-process section's, ``idempotent``, between a ``range`` step and a last step)."""
    if shape == "fanout":
        return fanout_yaml(ECHO, steps)
    lines = [
        "version: 1",
        "servers:",
        f"  echo: {{command: {json.dumps(ECHO)}, max_concurrency: 64}}",
        "steps:",
    ]
    for i in range(steps):
        before = i - 1 if shape == "chain" else i - WIDTH
        lines += [f"  s{i}:", "    server: echo", "    tool: echo", "    idempotent: true"]
        if before >= 0:
            lines.append(f'    args: {{text: "${{{{ steps.s{before}.text }}}}"}}')
        else:
            lines.append(f"    args: {{text: t{i}}}")
    return "\n".join(lines) + "\n"


def write_workflow(tmp: Path, shape: str, steps: int) -> Path:
    path = tmp / f"{shape}-{steps}.yaml"
    if not path.exists():
        path.write_text(workflow_text(shape, steps))
    return path


def measured(argv: list[str], *, cwd: Path, timeout: float) -> dict[str, Any]:
    """Run ``argv``; wall and CPU seconds, peak RSS in MiB, exit code and stdout. A run that outlives
    ``timeout`` is killed and reported as such (``timed_out``)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timed_out = False
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                timed_out = True
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0 and not timed_out:
        sys.stderr.write(stderr[-2000:])
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": usage.ru_maxrss / 1024,
        "exit_code": proc.returncode,
        "timed_out": timed_out,
        "stdout": stdout,
    }


def bench_validate(path: Path, timeout: float) -> dict[str, Any]:
    return measured([PY, "-c", VALIDATE, str(path)], cwd=REPO, timeout=timeout)


def bench_plan(path: Path, timeout: float) -> dict[str, Any]:
    return measured([MCP_RUN, "plan", str(path)], cwd=path.parent, timeout=timeout)


def bench_run(path: Path, timeout: float, *, journal: bool = True) -> dict[str, Any]:
    tmp = path.parent
    argv = [MCP_RUN, str(path), "--no-progress", "--quiet", "--json", "--new-run"]
    argv += ["--state-dir", str(tmp / f"state-{path.stem}")] if journal else ["--no-journal"]
    row = measured(argv, cwd=tmp, timeout=timeout)
    if row["exit_code"] == 0:
        summary = json.loads(row["stdout"])
        assert summary["status"] == "succeeded", summary["status"]
        row["run_s"] = summary["duration_s"]
    return row


CHAIN_CPU_RATIO = 5.0  # CPU per step of a chain, at most this many times a fan-out's CPU per item
CHAIN_PEAK_MIB = 300.0


def bench_chain(tmp: Path, steps: int, *, timeout: float = 900.0) -> list[dict[str, Any]]:
    """The engine section's rows: a chain of ``steps`` steps and a fan-out of as many items, run one after the
    other (journal on), so that their CPU per call is compared within one run."""
    rows = []
    for shape, what in (("chain", f"chain of {steps:,} steps"), ("fanout", f"fan-out of {steps:,} (for the chain)")):
        row = bench_run(write_workflow(tmp, shape, steps), timeout)
        if row["exit_code"] != 0:
            raise RuntimeError(f"{what} exited {row['exit_code']}" + (" (killed)" if row["timed_out"] else ""))
        per = row["cpu_s"] / steps * 1e6
        rows.append(
            {
                "section": "engine",
                "what": f"{what}: {per:,.0f} µs CPU per call",
                "shape": shape,
                "steps": steps,
                "wall_s": row["wall_s"],
                "run_s": row["run_s"],
                "calls_per_s": steps / row["run_s"],
                "cpu_s": row["cpu_s"],
                "cpu_us_per_call": per,
                "peak_rss_mib": row["peak_rss_mib"],
            }
        )
        print(
            f"  {what:<36} {row['wall_s']:>7.2f} s wall  {per:>8,.0f} µs CPU/call  "
            f"{row['peak_rss_mib']:>6.1f} MiB peak RSS",
            flush=True,
        )
    return rows


def chain_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets of issue 16 for many steps, from :func:`bench_chain`'s rows."""
    chain = next((r for r in rows if r.get("shape") == "chain"), None)
    fan = next((r for r in rows if r.get("shape") == "fanout"), None)
    if chain is None or fan is None:
        return []
    n = chain["steps"]
    ratio = chain["cpu_us_per_call"] / fan["cpu_us_per_call"]
    return [
        {
            "target": f"chain of {n:,} steps: CPU per step / fan-out's CPU per item",
            "value": ratio,
            "limit": CHAIN_CPU_RATIO,
            "unit": "x",
            "met": ratio <= CHAIN_CPU_RATIO,
        },
        {
            "target": f"chain of {n:,} steps: peak RSS",
            "value": chain["peak_rss_mib"],
            "limit": CHAIN_PEAK_MIB,
            "unit": "MiB",
            "met": chain["peak_rss_mib"] <= CHAIN_PEAK_MIB,
        },
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.steps", description=__doc__)
    parser.add_argument("--sizes", default="1000,5000,20000,60000")
    parser.add_argument("--shapes", default="chain,wide")
    parser.add_argument("--only", default="validate,plan,run")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--no-journal", action="store_true", help="runs with --no-journal")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    only = args.only.split(",")
    benches = {"validate": bench_validate, "plan": bench_plan}
    print("| shape | steps | what | wall s | CPU s | CPU µs/step | peak RSS MiB |")
    print("|---|--:|---|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory(prefix="mcp-run-steps-") as tmp:
        for shape in shapes:
            for n in sizes:
                path = write_workflow(Path(tmp), shape, n)
                for what in only:
                    if shape == "fanout" and what != "run":
                        continue
                    if what == "run":
                        row = bench_run(path, args.timeout, journal=not args.no_journal)
                    else:
                        row = benches[what](path, args.timeout)
                    flag = (
                        " (killed)"
                        if row["timed_out"]
                        else ""
                        if row["exit_code"] == 0
                        else f" (exit {row['exit_code']})"
                    )
                    print(
                        f"| {shape} | {n:,} | {what}{flag} | {row['wall_s']:.2f} | {row['cpu_s']:.2f} | "
                        f"{row['cpu_s'] / n * 1e6:,.0f} | {row['peak_rss_mib']:.0f} |",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
