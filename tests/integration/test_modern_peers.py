"""MCP 2026-07-28 against the official SDK's server (mcp 2.3.0): stateless dual-era mode and modern-only
(every request to the SDK's own 2026-07-28 handler). Real sockets on 127.0.0.1, the real clock, each test
bounded; a whole workflow runs end to end through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
import trio

from runner._trio import single_error
from runner.protocol.mcp import Progress
from runner.session import SessionOptions, open_session
from runner.transports.http.transport import HttpParams, open_http_transport
from tests.integration.peers import sdk_http_server

pytestmark = pytest.mark.integration

MODES = {"stateless": ("--stateless",), "modern-only": ("--modern-only",)}


class _Seen:
    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    async def hook(self, request: httpx2.Request) -> None:
        self.requests.append(request)


@pytest.mark.parametrize("mode", MODES)
async def test_the_session_speaks_2026_07_28_to_the_sdk_server(mode: str) -> None:
    seen = _Seen()
    progress: list[Progress] = []
    with trio.fail_after(60):
        async with sdk_http_server(*MODES[mode]) as server:
            client = httpx2.AsyncClient(event_hooks={"request": [seen.hook]})
            with single_error():
                async with (
                    client,
                    open_http_transport(HttpParams(url=server.url), client=client) as transport,
                    open_session(transport, SessionOptions(name="sdk")) as session,
                ):
                    assert session.era.modern and session.protocol_version == "2026-07-28"
                    tools = {t.name for t in await session.list_tools()}
                    added = await session.call_tool("add", {"a": 2, "b": 40})
                    slow = await session.call_tool("slow", {"steps": 3, "delay": 0.01}, on_progress=progress.append)
                    await session.ping()
    assert {"echo", "add", "slow"} <= tools
    assert added.text == "42" and slow.text == "done 3"
    assert [p.progress for p in progress] == [1, 2, 3]
    assert [r.method for r in seen.requests] == ["POST"] * 5  # no GET stream, no DELETE: no session
    call = seen.requests[2]
    assert call.headers["mcp-method"] == "tools/call" and call.headers["mcp-name"] == "add"
    assert "mcp-session-id" not in call.headers


def _workflow(tmp: Path, url: str, protocol: str) -> Path:
    path = tmp / "flow.yaml"
    path.write_text(
        f"""
version: 1
servers:
  sdk:
    url: {json.dumps(url)}
    protocol: {json.dumps(protocol)}
inputs:
  numbers: {{type: array, default: [1, 2, 3, 4, 5]}}
steps:
  add:
    server: sdk
    tool: add
    for_each: ${{{{ inputs.numbers }}}}
    args: {{a: "${{{{ item }}}}", b: 100}}
  greet:
    server: sdk
    tool: echo
    args: {{text: "grüße"}}
outputs:
  sums: ${{{{ steps.add.results[*].structured.result }}}}
  greeting: ${{{{ steps.greet.text }}}}
"""
    )
    return path


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args, "--state-dir", str(tmp / "state"), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp,
    )


@pytest.mark.parametrize(
    ("mode", "protocol"), [("stateless", "auto"), ("modern-only", "auto"), ("stateless", "2025-11-25")]
)
async def test_a_workflow_runs_end_to_end(tmp_path: Path, mode: str, protocol: str) -> None:
    with trio.fail_after(150):
        async with sdk_http_server(*MODES[mode]) as server:
            workflow = _workflow(tmp_path, server.url, protocol)
            output = tmp_path / "out.json"
            result = await trio.to_thread.run_sync(
                lambda: _run(tmp_path, "run", str(workflow), "--output", str(output))
            )
    assert result.returncode == 0, result.stderr
    outputs = json.loads(output.read_text())
    assert outputs == {"sums": [101, 102, 103, 104, 105], "greeting": "grüße"}


async def test_a_pinned_2025_version_against_a_modern_only_server_exits_4(tmp_path: Path) -> None:
    with trio.fail_after(150):
        async with sdk_http_server("--modern-only") as server:
            args = ("call", "--protocol-version", "2025-11-25", "--tool", "echo", "--args", '{"text": "x"}', server.url)
            result = await trio.to_thread.run_sync(lambda: _run_call(tmp_path, *args))
    assert result.returncode == 4, result.stderr
    assert "could not initialize" in result.stderr and "io.modelcontextprotocol/protocolVersion" in result.stderr


def _run_call(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp,
    )
