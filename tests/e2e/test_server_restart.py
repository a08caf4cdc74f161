"""A server that restarts mid-run: the batch goes on without calling anything twice that must not be.

Real servers on loopback (server-everything over Streamable HTTP, which answers 400 to a session it does not
know; the official SDK's server, which answers 404; a stdio server), killed with SIGKILL while mcp-run is
in the middle of a fan-out, then started again on the same port. Real processes, so the real clock, each
step bounded.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.support import environment
from tests.integration.peers import SDK_SERVER, RunningServer, everything_http_server, sdk_http_server

pytestmark = pytest.mark.integration

ITEMS = 40


def workflow(tmp: Path, *, tool: str, args: str, idempotent: bool, server: str) -> Path:
    path = tmp / "batch.yaml"
    path.write_text(
        f"""
version: 1
servers:
  peer:
{server}
    max_concurrency: 4
inputs:
  items: {{type: array}}
steps:
  each:
    server: peer
    tool: {tool}
    for_each: ${{{{ inputs.items }}}}
    key: ${{{{ item }}}}
    args: {args}
    idempotent: {str(idempotent).lower()}
"""
    )
    (tmp / "inputs.json").write_text(json.dumps({"items": [f"item-{i:02d}" for i in range(ITEMS)]}))
    return path


def journal(tmp: Path) -> list[dict[str, Any]]:
    paths = list((tmp / "state" / "runs").glob("*/journal.jsonl"))
    if not paths:
        return []
    data = paths[0].read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


async def wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    """Poll a file another process writes until ``condition`` holds (bounded)."""
    with trio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 - another process writes the file: nothing can notify us
            await trio.sleep(0.02)


async def start_runner(tmp: Path, path: Path) -> trio.Process:
    """``mcp-run`` in the background: its JSON summary goes to out.json, its console to err.txt."""
    argv = [sys.executable, "-m", "runner", str(path), "--inputs-file", str(tmp / "inputs.json"),
            "--state-dir", str(tmp / "state"), "--json", "--no-progress"]  # fmt: skip
    out = os.open(tmp / "out.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(tmp / "err.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        return await trio.lowlevel.open_process(argv, env=environment(), stdout=out, stderr=err, cwd=tmp)
    finally:
        os.close(out)
        os.close(err)


async def stop(process: trio.Process) -> None:
    """Kill ``process`` if a failed test left it running, and reap it."""
    if process.returncode is None:
        process.kill()
    with trio.move_on_after(10, shield=True):
        await process.wait()


def succeeded(tmp: Path) -> int:
    return sum(1 for e in journal(tmp) if e["type"] == "item_succeeded")


async def restart_mid_run(
    tmp: Path, path: Path, serve: Callable[[int], AbstractAsyncContextManager[RunningServer]], first: RunningServer
) -> tuple[int, dict[str, Any], str]:
    """With ``first`` serving: start mcp-run, SIGKILL the server once 10 items succeeded, keep it down a
    second, start it again on the same port, and let the run finish."""
    port = int(first.url.rsplit(":", 1)[1].split("/")[0])
    runner = await start_runner(tmp, path)
    try:
        await wait_for(lambda: succeeded(tmp) >= 10)
        first.process.kill()
        await first.process.wait()
        await trio.sleep(1.0)  # the outage: mcp-run keeps reconnecting meanwhile
        async with serve(port):
            with trio.fail_after(120):
                code = await runner.wait()
    finally:
        await stop(runner)
    stderr = (tmp / "err.txt").read_text()
    assert "Traceback" not in stderr, stderr
    return code, json.loads((tmp / "out.json").read_text()), stderr


def everything(port: int) -> AbstractAsyncContextManager[RunningServer]:
    return everything_http_server(port=port)


@pytest.mark.slow
@pytest.mark.parametrize("idempotent", [True, False])
async def test_server_everything_restarted_mid_run(tmp_path: Path, idempotent: bool) -> None:
    async with everything_http_server() as first:
        server = f"    url: {first.url}"
        path = workflow(
            tmp_path,
            tool="trigger-long-running-operation",
            args="{duration: 0.3, steps: 1}",
            idempotent=idempotent,
            server=server,
        )
        code, summary, stderr = await restart_mid_run(tmp_path, path, everything, first)
    check_outcome(tmp_path, code, summary, stderr, idempotent)


@pytest.mark.slow
@pytest.mark.parametrize("idempotent", [True, False])
async def test_official_sdk_server_restarted_mid_run(tmp_path: Path, idempotent: bool) -> None:
    count_file = tmp_path / "executions.txt"  # what the server ran, across both of its lives

    def serve(port: int) -> AbstractAsyncContextManager[RunningServer]:
        return sdk_http_server("--port", str(port), "--count-file", str(count_file))

    async with sdk_http_server("--count-file", str(count_file)) as first:
        args = "{key: '${{ item }}', delay: 0.2}"
        path = workflow(tmp_path, tool="count", args=args, idempotent=idempotent, server=f"    url: {first.url}")
        code, summary, stderr = await restart_mid_run(tmp_path, path, serve, first)
    check_outcome(tmp_path, code, summary, stderr, idempotent)
    executions = Counter(count_file.read_text().split())
    assert set(executions) >= {f"item-{i:02d}" for i in range(ITEMS)} - {d["item"] for d in summary["in_doubt"]}
    if not idempotent:
        assert max(executions.values()) == 1, "an item ran twice"


def check_outcome(tmp: Path, code: int, summary: dict[str, Any], stderr: str, idempotent: bool) -> None:
    counts = summary["steps"]["each"]
    events = journal(tmp)
    # The restart was noticed and got over: by a call that could not connect (the link reconnects:
    # "reconnected after"), or by the streams of the calls in flight, whose resumption the restarted server
    # refused, after which the session was re-initialized in place ("starting a new one"), or both.
    assert "server peer reconnected after" in stderr or "session expired on the server" in stderr, stderr
    if idempotent:
        assert (code, summary["status"], counts["succeeded"]) == (0, "succeeded", ITEMS), stderr
        return
    # Only the calls in flight when the server died are in doubt; every other item ran once.
    assert (code, summary["status"]) == (5, "in-doubt"), stderr
    in_doubt = {d["item"] for d in summary["in_doubt"]}
    assert 1 <= len(in_doubt) <= 4
    assert counts["succeeded"] + len(in_doubt) == ITEMS
    dispatches = Counter(e["item"] for e in events if e["type"] == "item_dispatched")
    # an item may be dispatched again only if its first dispatch surely never reached the server
    for key, n in dispatches.items():
        if n > 1:
            failed = [e for e in events if e["type"] == "item_failed" and e["item"] == key and e.get("retrying")]
            assert all(e["kind"] == "connection-before-send" for e in failed), (key, failed)


async def test_a_stdio_server_killed_mid_run_is_restarted(tmp_path: Path) -> None:
    count_file = tmp_path / "executions.txt"
    server = (
        f"    command: [{json.dumps(sys.executable)}, {json.dumps(str(SDK_SERVER))}, stdio, --count-file, "
        f"{json.dumps(str(count_file))}]"
    )
    # Each call takes 0.1 s, so the 30 items left when the server is killed need ~0.75 s more (4 at a time): the
    # kill is mid-run however loaded the machine, and later items must reconnect. (Without it the run could end
    # with the kill, its last calls in doubt and nothing left to reconnect for.)
    path = workflow(tmp_path, tool="count", args="{key: '${{ item }}', delay: 0.1}", idempotent=False, server=server)
    runner = await start_runner(tmp_path, path)
    try:
        await wait_for(lambda: succeeded(tmp_path) >= 10)
        children = _children(runner.pid)  # the stdio server is the runner's child
        assert children, "no server process found"
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        with trio.fail_after(120):
            code = await runner.wait()
    finally:
        await stop(runner)
    stderr = (tmp_path / "err.txt").read_text()
    summary = json.loads((tmp_path / "out.json").read_text())
    assert "Traceback" not in stderr
    assert "server peer reconnected after" in stderr
    executions = Counter(count_file.read_text().split())
    assert max(executions.values()) == 1, "an item ran twice"
    in_doubt = {d["item"] for d in summary["in_doubt"]}
    assert summary["steps"]["each"]["succeeded"] + len(in_doubt) == ITEMS
    assert code in (0, 5)  # 5 when a call was in flight as the server died (with the delay: nearly always)
    assert set(executions) >= {f"item-{i:02d}" for i in range(ITEMS)} - in_doubt


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
            if ppid == pid:
                found.append(int(entry))
    return found
