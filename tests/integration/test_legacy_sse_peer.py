"""mcp-run against a real 2024-11-05 HTTP+SSE server: the official SDK's ``sse`` mode (tests/peers/
sdk_asking_server.py, its GET stream at ``/mcp``, so the first POST there gets 405 as from a deployed legacy
server). The fallback, a whole workflow run end to end through the CLI (with the server's elicitation,
roots and sampling answered by policy), and a stream that drops mid-call. Real sockets, real clock, every
test bounded by ``trio.fail_after``."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from runner._trio import single_error
from runner.connect import HttpTarget, open_target
from runner.demo.server import LISTENING_RE
from runner.errors import ConnectFailed
from runner.protocol.mcp import LogMessage
from runner.session import SessionOptions
from tests.e2e.support import ROOT, environment
from tests.integration.peers import RunningServer, serve_http

pytestmark = pytest.mark.integration

ASKING_SERVER = ROOT / "tests" / "peers" / "sdk_asking_server.py"


def _url(line: str) -> str | None:
    match = LISTENING_RE.match(line)
    return match.group(1) if match else None


@asynccontextmanager
async def asking_server(transport: str, *extra: str) -> AsyncIterator[RunningServer]:
    argv = [sys.executable, str(ASKING_SERVER), transport, "--port", "0", *extra]
    async with serve_http(argv, _url) as server:
        yield server


async def test_auto_falls_back_to_the_legacy_transport_and_says_so() -> None:
    warnings: list[str] = []
    with trio.fail_after(60):
        async with asking_server("sse") as server:
            options = SessionOptions(name="old", on_warning=warnings.append)
            with single_error():
                async with open_target(HttpTarget(url=server.url), options) as session:
                    result = await session.call_tool("add", {"a": 2, "b": 40})
    assert result.text == "42"
    (warning,) = warnings
    assert warning.startswith("old: the server speaks the 2024-11-05 HTTP+SSE transport (deprecated)")
    assert "405 Method Not Allowed" in warning


async def test_pinned_sse_goes_straight_to_the_stream_and_pinned_streamable_http_does_not_fall_back() -> None:
    warnings: list[str] = []
    with trio.fail_after(60):
        async with asking_server("sse") as server:
            options = SessionOptions(name="old", on_warning=warnings.append)
            with single_error():
                async with open_target(HttpTarget(url=server.url, transport="sse"), options) as session:
                    assert (await session.call_tool("echo", {"text": "hi"})).text == "hi"
                with pytest.raises(ConnectFailed, match="405"):
                    async with open_target(HttpTarget(url=server.url, transport="streamable-http"), options):
                        pytest.fail("must not connect")
    assert warnings == []


async def test_a_modern_server_is_not_mistaken_for_a_legacy_one() -> None:
    warnings: list[str] = []
    with trio.fail_after(60):
        async with asking_server("http") as server:
            options = SessionOptions(name="new", on_warning=warnings.append)
            with single_error():
                async with open_target(HttpTarget(url=server.url), options) as session:
                    assert (await session.call_tool("echo", {"text": "hi"})).text == "hi"
    assert not any("2024-11-05" in w for w in warnings)


async def test_the_servers_questions_are_answered_by_policy_over_legacy_sse() -> None:
    logs: list[LogMessage] = []
    with trio.fail_after(60):
        async with asking_server("sse") as server:
            options = SessionOptions(name="old", on_log=lambda m, _r: logs.append(m))
            with single_error():
                async with open_target(HttpTarget(url=server.url, transport="sse"), options) as session:
                    asked = (await session.call_tool("ask", {})).text
                    roots = (await session.call_tool("roots", {})).text
                    sampled = (await session.call_tool("sample", {})).text
    assert asked == "decline"
    assert roots.startswith("roots refused: no roots are configured")
    assert sampled.startswith("sampling refused: mcp-run has no language model")
    assert [m.logger for m in logs] == ["mcp-run"] * 3


WORKFLOW = """\
version: 1
inputs:
  url: {type: string}
servers:
  old:
    url: ${{ inputs.url }}
    elicitation: defaults
    roots: [data, "file:///srv/shared"]
steps:
  ask:
    server: old
    tool: ask
  roots:
    server: old
    tool: roots
  add:
    server: old
    tool: add
    args: {a: 2, b: 40}
outputs:
  asked: ${{ steps.ask.text }}
  roots: ${{ lines(steps.roots.text) }}
  sum: ${{ steps.add.text }}
"""


async def run_cli(cwd: Path, *args: str) -> Any:
    return await trio.run_process(
        [sys.executable, "-m", "runner", *args],
        cwd=cwd,
        env=environment(),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        stdin=b"",
    )


def journal_events(state: Path) -> list[dict[str, Any]]:
    (journal,) = state.rglob("*.jsonl")
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


async def test_a_workflow_runs_end_to_end_against_a_legacy_server(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(WORKFLOW)
    out = tmp_path / "out.json"
    with trio.fail_after(120):
        async with asking_server("sse") as server:
            done = await run_cli(
                tmp_path, str(flow), "--input", f"url={server.url}", "--state-dir", "state", "--output", str(out)
            )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "the server speaks the 2024-11-05 HTTP+SSE transport" in stderr
    outputs = json.loads(out.read_text())
    assert outputs["sum"] == "42"
    assert outputs["asked"] == "accept {'name': 'John Doe', 'count': 3, 'ratio': 0.5, 'ok': True}"
    assert outputs["roots"] == [(tmp_path / "data").as_uri(), "file:///srv/shared"]
    notes = [e for e in journal_events(tmp_path / "state") if e.get("type") == "log"]
    said = [str(e.get("data")) for e in notes if e.get("logger") == "mcp-run"]
    assert any(s.startswith('old asked elicitation/create "Fill in the form') and "accepted" in s for s in said)
    assert any(s.startswith("old asked roots/list: answered 2 root(s)") for s in said)


async def test_the_command_line_overrides_the_workflows_elicitation(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(WORKFLOW)
    out = tmp_path / "out.json"
    with trio.fail_after(120):
        async with asking_server("sse") as server:
            done = await run_cli(
                tmp_path,
                str(flow),
                "--input",
                f"url={server.url}",
                "--state-dir",
                "state",
                "--output",
                str(out),
                "--elicitation",
                "decline",
            )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(out.read_text())["asked"] == "decline"
    assert 'old asked elicitation/create "Fill in the form (every field has a default)": declined' in (
        done.stderr.decode()
    )


async def wait_for_line(path: Path) -> None:
    """Poll (bounded by the caller's deadline) until the server wrote a line to ``path``: a file written by
    another process has nothing to wait on."""
    file = trio.Path(path)
    while not (await file.exists() and (await file.read_text()).endswith("\n")):  # noqa: ASYNC110
        await trio.sleep(0.05)


DROP = """\
version: 1
inputs:
  url: {type: string}
servers:
  old:
    url: ${{ inputs.url }}
    transport: sse
    reconnect: false
steps:
  write:
    server: old
    tool: count
    args: {key: once, delay: 30}
"""


async def test_a_dropped_stream_leaves_the_call_in_doubt_and_does_not_call_again(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(DROP)
    counts = tmp_path / "counts.txt"
    result: list[Any] = []
    with trio.fail_after(120):
        async with asking_server("sse", "--count-file", str(counts)) as server, trio.open_nursery() as nursery:

            async def run() -> None:
                result.append(await run_cli(tmp_path, str(flow), "--input", f"url={server.url}", "--state-dir", "s"))

            nursery.start_soon(run)
            await wait_for_line(counts)
            server.process.kill()  # the stream drops with the call in flight
    (done,) = result
    stderr = done.stderr.decode()
    assert done.returncode == 5, stderr  # outcome unknown
    assert "in doubt" in stderr or "outcome unknown" in stderr.lower()
    assert counts.read_text() == "once\n"
