"""Every Temporal command, run as the ``mcp-run`` program, exits with its documented code on its success and its
error paths: each leaves through one funnel (``os._exit`` after flushing), so the SDK's abort at interpreter exit
(temporalio/sdk-python#300, once seen as exit -6) never replaces the code."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.support import sigint_default
from tests.temporal.support import ROOT, cli, dev_server, fan_out_workflow, in_process_worker, summary_of, target_of

pytestmark = pytest.mark.slow

NOWHERE = ("--temporal-address", "127.0.0.1:9")  # nothing listens there: exit 4


async def _worker_stopped_by(address: str, signum: int) -> tuple[int, str]:
    """``mcp-run worker``, sent ``signum`` once it serves: (exit code, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runner", "worker", "--engine", "temporal", "--temporal-address", address,
        "--task-queue", "exits-w", stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env=dict(os.environ), preexec_fn=sigint_default,
    )  # fmt: skip
    assert proc.stderr is not None
    line = await asyncio.wait_for(proc.stderr.readline(), 60)
    assert b"worker on task queue" in line, line
    proc.send_signal(signum)
    rest = await asyncio.wait_for(proc.stderr.read(), 60)
    code = await asyncio.wait_for(proc.wait(), 60)
    return code, (line + rest).decode()


def test_every_command_exits_with_its_code(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 1)
    (tmp_path / "parked").mkdir()
    parked = fan_out_workflow(tmp_path / "parked", 1)  # another file: its own run

    async def on_temporal() -> list[tuple[str, int, int, str]]:
        seen: list[tuple[str, int, int, str]] = []  # (what, expected, got, stderr)

        def check(what: str, expected: int, result: tuple[int, str, str]) -> None:
            seen.append((what, expected, result[0], result[2]))

        async with dev_server() as env:
            here = ("--temporal-address", target_of(env))
            # Errors that need no run: Temporal unreachable (4) or an unknown run (2).
            unreachable = await asyncio.gather(
                cli(str(workflow), "--engine", "temporal", *NOWHERE),
                cli("worker", "--engine", "temporal", *NOWHERE),
                cli("cancel", "r-unknown", "--engine", "temporal", *NOWHERE),
                cli("export", "r-unknown", "--engine", "temporal", *NOWHERE),
                cli("runs", "--engine", "temporal", *NOWHERE),
                cli("show", "r-unknown", "--engine", "temporal", *NOWHERE),
                cli("logs", "r-unknown", "--engine", "temporal", *NOWHERE),
                cli("resume", "r-unknown", "--engine", "temporal", "--skip-in-doubt", *NOWHERE),
            )
            for what, result in zip(
                ("run", "worker", "cancel", "export", "runs", "show", "logs", "resume"), unreachable, strict=True
            ):
                check(f"{what} unreachable", 4, result)
            unknown = await asyncio.gather(
                cli("cancel", "r-unknown", "--engine", "temporal", *here),
                cli("export", "r-unknown", "--engine", "temporal", *here),
                cli("show", "r-unknown", "--engine", "temporal", *here),
                cli("logs", "r-unknown", "--engine", "temporal", *here),
                cli("resume", "r-unknown", "--engine", "temporal", "--rerun-in-doubt", *here),
            )
            for what, result in zip(("cancel", "export", "show", "logs", "resume"), unknown, strict=True):
                check(f"{what} unknown run", 2, result)

            # A run parked on a task queue no worker serves: open. A second start is busy (6); cancel works (0).
            parked_queue = ("--task-queue", "exits-nowhere")
            check("run --detach", 0, await cli(str(parked), "--engine", "temporal", *here, *parked_queue, "--detach"))
            check("run while open", 6, await cli(str(parked), "--engine", "temporal", *here, *parked_queue))
            [(_w, _e, _g, err)] = seen[-2:-1]
            parked_id = err.split()[1]
            check("cancel", 0, await cli("cancel", parked_id, "--engine", "temporal", *here))

            # A run to its end with a worker; then each reading command on it (0), and what refuses it (2).
            async with in_process_worker(env, "exits"):
                done = await cli(str(workflow), "--engine", "temporal", *here, "--task-queue", "exits", "--json")
                check("run", 0, done)
                run_id = summary_of(done[1])["run_id"]
                readers = await asyncio.gather(
                    cli("export", run_id, "--engine", "temporal", *here),
                    cli("runs", "--engine", "temporal", *here),
                    cli("show", run_id, "--engine", "temporal", *here),
                    cli("logs", run_id, "--engine", "temporal", *here),
                )
                for what, result in zip(("export", "runs", "show", "logs"), readers, strict=True):
                    check(what, 0, result)
                check("resume a closed run", 2, await cli("resume", run_id, "--engine", "temporal", "--skip-in-doubt",
                                                          *here))  # fmt: skip
                check("cancel a closed run", 2, await cli("cancel", run_id, "--engine", "temporal", *here))
            code, err = await _worker_stopped_by(target_of(env), signal.SIGINT)
            seen.append(("worker, Ctrl-C", 130, code, err))
            code, err = await _worker_stopped_by(target_of(env), signal.SIGTERM)  # as a service manager stops it
            said = "worker stopped (SIGTERM)" in err  # and says so: a missing message counts as a wrong code
            seen.append(("worker, SIGTERM", 143, code if said else -1, err))
        return seen

    seen = asyncio.run(on_temporal())
    wrong = [(what, expected, got, err[-400:]) for what, expected, got, err in seen if got != expected]
    assert not wrong, wrong
    assert not [what for what, _e, _g, err in seen if "Traceback" in err]
