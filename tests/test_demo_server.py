"""The demo server (``python -m runner.demo``) and the SDK test peer, driven by the official SDK client.

mcp-run's own client is deliberately not used here: these tests pin down what the servers do, so
the client tests can rely on them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.streamable_http import EventMessage
from mcp_types import CallToolResult, JSONRPCNotification, LoggingMessageNotificationParams, TextContent

from runner.demo.event_store import InMemoryEventStore
from runner.demo.server import LISTENING_RE, render_markdown

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "workflows" / "docs"
PEER = REPO / "tests" / "peers" / "sdk_server.py"
TIMEOUT = 30  # real-clock guard for anything that talks to a subprocess


def demo_stdio() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "runner.demo"], cwd=REPO)


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


class Recorder:
    """Collects progress and log notifications of a call."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[LoggingMessageNotificationParams] = []

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(params)


@asynccontextmanager
async def http_server(args: Sequence[str]) -> AsyncIterator[str]:
    """Start a server printing the port line, yield its URL, then terminate it."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, *args], cwd=REPO, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    stderr = proc.stderr
    try:
        async with trio.open_nursery() as nursery:
            buffer = b""
            with trio.fail_after(TIMEOUT):
                while b"\n" not in buffer:
                    chunk = await stderr.receive_some()
                    if not chunk:
                        raise AssertionError(f"server exited ({await proc.wait()}) before listening: {buffer!r}")
                    buffer += chunk
            first, _, _ = buffer.partition(b"\n")
            match = LISTENING_RE.match(first.decode())
            assert match, f"unexpected first line: {first!r}"

            async def drain() -> None:  # keep the pipe from filling up and blocking the server
                while await stderr.receive_some():
                    pass

            nursery.start_soon(drain)
            yield match.group(1)
            nursery.cancel_scope.cancel()
    finally:
        proc.terminate()
        with trio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# --------------------------------------------------------------------------------------------------
# In-process units


def test_render_markdown_title_table_and_code() -> None:
    page, title, had_heading = render_markdown((DOCS / "configuration.md").read_text(), "fallback")
    assert had_heading and title == "Configuration"
    assert page.startswith("<!doctype html>")
    assert "<title>Configuration</title>" in page
    assert "<h1>Configuration</h1>" in page
    assert "<table>" in page and "<th>Key</th>" in page
    assert '<pre><code class="language-toml">' in page


def test_render_markdown_escapes_raw_html_and_falls_back_to_file_name() -> None:
    page, title, had_heading = render_markdown("plain <script>alert(1)</script> text\n", "notes")
    assert not had_heading and title == "notes"
    assert "<script>" not in page and "&lt;script&gt;" in page


async def test_event_store_replays_only_later_events_of_the_same_stream() -> None:
    store = InMemoryEventStore()
    message = JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"n": 1})
    prime = await store.store_event("a", None)
    first = await store.store_event("a", message)
    await store.store_event("b", message)
    second = await store.store_event("a", message)
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    assert await store.replay_events_after(prime, send) == "a"
    assert [e.event_id for e in sent] == [first, second]
    assert await store.replay_events_after("no-such-id", send) is None
    assert store  # an empty-looking store must still be truthy for the SDK


async def test_event_store_is_bounded() -> None:
    store = InMemoryEventStore(max_events=2)
    oldest = await store.store_event("a", None)
    await store.store_event("a", None)
    await store.store_event("a", None)
    assert store.event_count == 2

    async def send(event: EventMessage) -> None:
        raise AssertionError("nothing to replay")

    assert await store.replay_events_after(oldest, send) is None


# --------------------------------------------------------------------------------------------------
# The demo server over stdio


@pytest.mark.integration
async def test_lists_the_four_tools_with_annotations() -> None:
    with trio.fail_after(TIMEOUT):
        async with Client(demo_stdio()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"list_markdown", "convert_markdown", "write_summary", "echo"}
    listing = tools["list_markdown"].annotations
    assert listing is not None and listing.read_only_hint and listing.idempotent_hint
    convert = tools["convert_markdown"].annotations
    assert convert is not None and convert.idempotent_hint and convert.destructive_hint is False
    schema = tools["convert_markdown"].output_schema
    assert schema is not None and set(schema["required"]) == {"source", "output", "bytes", "title"}


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_convert_one_document(tmp_path: Path, mode: Any) -> None:
    seen = Recorder()
    with trio.fail_after(TIMEOUT):
        async with Client(demo_stdio(), mode=mode, log_level="info", logging_callback=seen.on_log) as client:
            result = await client.call_tool(
                "convert_markdown",
                {"path": str(DOCS / "cli-reference.md"), "out_dir": str(tmp_path / "html")},
                progress_callback=seen.on_progress,
            )
    assert not result.is_error, result
    output = tmp_path / "html" / "cli-reference.html"
    assert result.structured_content == {
        "source": str(DOCS / "cli-reference.md"),
        "output": str(output),
        "bytes": output.stat().st_size,
        "title": "CLI reference",
    }
    page = output.read_text()
    assert "<title>CLI reference</title>" in page
    assert "<h1>CLI reference</h1>" in page
    assert "<th>Option</th>" in page and "<td><code>--config PATH</code></td>" in page
    # Stages read, parse, render, write, done: increasing, with a total and a message.
    assert [p for p, _, _ in seen.progress] == [0, 1, 2, 3, 4]
    assert all(total == 4 and message for _, total, message in seen.progress)
    assert [log.level for log in seen.logs] == ["info"]
    assert "cli-reference.md" in str(seen.logs[0].data)
    assert not list((tmp_path / "html").glob(".*partial"))


@pytest.mark.integration
async def test_missing_file_is_a_tool_error(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with Client(demo_stdio()) as client:
            result = await client.call_tool(
                "convert_markdown", {"path": str(tmp_path / "absent.md"), "out_dir": str(tmp_path)}
            )
    assert result.is_error
    assert "Markdown file not found" in text_of(result) and "absent.md" in text_of(result)
    assert not (tmp_path / "absent.html").exists()


@pytest.mark.integration
async def test_batch_list_convert_summarise(tmp_path: Path) -> None:
    seen = Recorder()
    out = tmp_path / "site"
    with trio.fail_after(TIMEOUT):
        async with Client(demo_stdio(), log_level="info", logging_callback=seen.on_log) as client:
            listing = await client.call_tool("list_markdown", {"folder": str(DOCS)})
            assert listing.structured_content is not None
            files: list[str] = listing.structured_content["files"]
            results = []
            for path in files:
                converted = await client.call_tool("convert_markdown", {"path": path, "out_dir": str(out)})
                assert not converted.is_error, converted
                results.append(converted.structured_content)
            summary = await client.call_tool(
                "write_summary", {"path": str(out / "index.html"), "results": results, "title": "Lantern"}
            )
            echoed = await client.call_tool("echo", {"text": "héllo"})

    assert files == sorted(str(p) for p in DOCS.glob("*.md"))
    assert listing.structured_content["count"] == len(files) >= 12
    assert text_of(listing).lstrip().startswith("{")  # the same content as JSON text
    assert summary.structured_content is not None
    assert summary.structured_content["count"] == len(files)
    index = (out / "index.html").read_text()
    assert '<a href="deploy-targets.html">Deploy targets</a>' in index
    assert '<a href="notice.html">notice</a>' in index  # no heading: titled after the file
    assert any(log.level == "warning" and "notice.md" in str(log.data) for log in seen.logs)
    assert text_of(echoed) == "héllo"


@pytest.mark.integration
async def test_summary_as_markdown_from_bare_paths(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with Client(demo_stdio()) as client:
            result = await client.call_tool(
                "write_summary",
                {"path": str(tmp_path / "summary.md"), "results": [str(tmp_path / "pages" / "a b.html")]},
            )
    assert result.structured_content is not None
    assert result.structured_content["entries"] == [{"title": "a b", "href": "pages/a%20b.html"}]
    assert "- [a b](pages/a%20b.html)" in (tmp_path / "summary.md").read_text()


# --------------------------------------------------------------------------------------------------
# Over Streamable HTTP


@pytest.mark.integration
async def test_demo_over_http_reports_its_port() -> None:
    async with http_server(["-m", "runner.demo", "--transport", "http", "--port", "0"]) as url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url)
        with trio.fail_after(TIMEOUT):
            async with Client(url) as client:
                result = await client.call_tool("echo", {"text": "over http"})
    assert text_of(result) == "over http"


@pytest.mark.integration
async def test_demo_refuses_a_non_loopback_host() -> None:
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-m", "runner.demo", "--transport", "http", "--host", "0.0.0.0"],
            cwd=REPO,
            check=False,
            capture_stdout=True,
            capture_stderr=True,
        )
    assert done.returncode == 2
    assert b"loopback" in done.stderr


# When its stream is closed early, the SDK client (httpx2 under trio) drops SSE async generators
# without closing them; trio reports each one as a ResourceWarning when it is garbage collected.
@pytest.mark.filterwarnings("ignore:Async generator 'httpx2:ResourceWarning")
@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning")
@pytest.mark.integration
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_peer_close_stream_resumes_and_runs_once(tmp_path: Path, mode: Any) -> None:
    counts = tmp_path / "counts"
    # "legacy" (the initialize handshake, 2025-11-25) really closes the stream and resumes; on the
    # SDK's 2026-07-28 path ("auto") close_sse_stream() is a no-op and the call simply completes.
    # The client reconnects ~20 ms after the close; the next event comes 100 ms after it. (The SDK's
    # transport drops events stored while it switches a resumed stream from replay to live.)
    args = [str(PEER), "http", "--resumable", "--retry-interval", "20", "--count-file", str(counts)]
    seen = Recorder()
    async with http_server(args) as url:
        with trio.fail_after(TIMEOUT):
            async with Client(url, mode=mode) as client:
                closed = await client.call_tool(
                    "close_stream", {"steps": 6, "delay": 0.1}, progress_callback=seen.on_progress
                )
                unknown = await client.call_tool("no_such_tool", {})
    assert text_of(closed) == "closed-and-finished"
    assert [p for p, _, _ in seen.progress] == [1, 2, 3, 4, 5, 6]
    assert counts.read_text() == "close_stream\n"
    # An unknown tool name is a tool error, not a JSON-RPC error.
    assert unknown.is_error and text_of(unknown) == "Unknown tool: no_such_tool"


@pytest.mark.integration
async def test_peer_tools_over_stdio(tmp_path: Path) -> None:
    counts = tmp_path / "counts"
    seen = Recorder()
    params = StdioServerParameters(command=sys.executable, args=[str(PEER), "--count-file", str(counts)], cwd=REPO)
    with trio.fail_after(TIMEOUT):
        async with Client(params, log_level="info", logging_callback=seen.on_log) as client:
            added = await client.call_tool("add", {"a": 2, "b": 3})
            slow = await client.call_tool("slow", {"steps": 3, "delay": 0.01}, progress_callback=seen.on_progress)
            failed = await client.call_tool("fail", {"message": "boom"})
            structured = await client.call_tool("structured")
            for key in ("x", "y", "x"):
                await client.call_tool("count", {"key": key})
            big = await client.call_tool("big", {"n": 70_000})
    assert added.structured_content == {"result": 5}
    assert text_of(slow) == "done 3"
    assert seen.progress == [(1, 3, "step 1/3"), (2, 3, "step 2/3"), (3, 3, "step 3/3")]
    assert [log.data for log in seen.logs] == ["slow step 1", "slow step 2", "slow step 3"]
    assert failed.is_error and "boom" in text_of(failed)
    assert structured.structured_content == {"name": "mcp-run", "items": [1, 2, 3], "nested": {"ok": True}}
    assert counts.read_text() == "x\ny\nx\n"
    assert len(text_of(big).encode()) == 70_000
