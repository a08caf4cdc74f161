"""The demo MCP server that mcp-run's example workflows drive: a real Markdown -> HTML batch converter.

Built on the official MCP Python SDK (``MCPServer``) and markdown-it-py; importable only with the
``demo`` extra installed (``pip install 'mcp-batch-run[demo]'``).

Run it as ``mcp-run-demo`` (or ``python -m runner.demo``) ``[--transport stdio|http] [--host 127.0.0.1] [--port 0]
[--resumable] [--json-response] [--retry-interval MS]``.

Tools (every result is structured content, also sent as JSON text):

``list_markdown(folder, pattern="*.md")``
    ``{"folder": abs, "pattern": str, "files": [abs paths, sorted], "count": n}``. Paths are
    absolute, so each can be fed straight into ``convert_markdown``. ``pattern`` is a
    :meth:`pathlib.Path.glob` pattern (``**/*.md`` recurses). Read-only, idempotent.
``convert_markdown(path, out_dir)``
    Renders one file (CommonMark + tables, raw HTML disabled) into ``<out_dir>/<stem>.html``, a
    complete HTML document titled after the first heading. Reports progress in four stages (read,
    parse, render, write) when the caller sent a progress token, logs with ``notifications/message``
    (a warning when the file has no heading). Returns ``{"source": abs, "output": abs, "bytes": n,
    "title": str}``. A missing/unreadable input is a tool error (``isError: true``).
    Idempotent, not destructive (it only creates or rewrites its own output file).
``write_summary(path, results, title="Converted documents")``
    ``results`` is a list whose items are either ``convert_markdown`` results (objects with at least
    ``output``; ``title`` and ``source`` are used when present) or bare output paths. Writes an
    index linking every page, relative to the index: Markdown when ``path`` ends in ``.md``, HTML
    otherwise. Returns ``{"path": abs, "count": n, "entries": [{"title", "href"}]}``.
``echo(text)``
    Returns ``text`` (structured as ``{"result": text}``). Read-only, idempotent.

Over HTTP (``--transport http``) the server listens on a loopback address only; once it accepts
connections it prints exactly one line to stderr, ``MCP-RUN-DEMO listening on
http://127.0.0.1:PORT/mcp`` (see :data:`LISTENING_RE`), so ``--port 0`` is usable by tests.
"""

from __future__ import annotations

import argparse
import html
import ipaddress
import os
import re
import secrets
import socket
import sys
import warnings
from collections.abc import Sequence
from importlib.metadata import version as package_version
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import quote

import anyio
import uvicorn
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import EventStore
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from runner import __version__
from runner.demo.event_store import InMemoryEventStore

__all__ = [
    "LISTENING_LINE",
    "LISTENING_RE",
    "ConversionResult",
    "MarkdownListing",
    "SummaryEntry",
    "SummaryResult",
    "build_server",
    "main",
    "render_markdown",
    "serve_streamable_http",
    "tool_log",
]

SERVER_NAME = "mcp-run-demo"

#: The line printed (to stderr, flushed) once the HTTP server accepts connections.
LISTENING_LINE = "MCP-RUN-DEMO listening on {url}"
#: Matches :data:`LISTENING_LINE`; group 1 is the endpoint URL.
LISTENING_RE = re.compile(r"^MCP-RUN-DEMO listening on (http://\S+/mcp)$")

Ctx = Context[Any, Any]

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False)
WRITES_OWN_OUTPUT = ToolAnnotations(
    read_only_hint=False, idempotent_hint=True, destructive_hint=False, open_world_hint=False
)


# --------------------------------------------------------------------------------------------------
# Result shapes (each becomes the tool's outputSchema)


class MarkdownListing(BaseModel):
    folder: str
    pattern: str
    files: list[str]
    count: int


class ConversionResult(BaseModel):
    source: str
    output: str
    bytes: int
    title: str


class SummaryEntry(BaseModel):
    title: str
    href: str


class SummaryResult(BaseModel):
    path: str
    count: int
    entries: list[SummaryEntry]


# --------------------------------------------------------------------------------------------------
# Markdown rendering


def _markdown() -> MarkdownIt:
    # CommonMark plus GFM tables; raw HTML is not passed through (the input is untrusted text).
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def _first_heading(tokens: Sequence[Token]) -> str | None:
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            inline = tokens[i + 1]
            parts = [child.content for child in inline.children or () if child.type in ("text", "code_inline")]
            text = "".join(parts).strip() or inline.content.strip()
            if text:
                return text
    return None


_HTML_PAGE = """\
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="mcp-run demo (markdown-it-py {mdit_version})">
<title>{title}</title>
</head>
<body>
<main>
{body}</main>
</body>
</html>
"""


def render_markdown(text: str, fallback_title: str) -> tuple[str, str, bool]:
    """Render Markdown ``text`` into a complete HTML document.

    Returns ``(document, title, had_heading)``; the title falls back to ``fallback_title``.
    """
    md = _markdown()
    tokens = md.parse(text)
    heading = _first_heading(tokens)
    body = md.renderer.render(tokens, md.options, {})
    title = heading or fallback_title
    page = _HTML_PAGE.format(mdit_version=package_version("markdown-it-py"), title=html.escape(title), body=body)
    return page, title, heading is not None


# --------------------------------------------------------------------------------------------------
# Tools


async def tool_log(ctx: Ctx, level: Literal["info", "warning"], message: str) -> None:
    """Send a ``notifications/message`` log for the current request (what ``ctx.info`` does).

    The SDK marks its logging helpers deprecated (SEP-2577, the 2026-07-28 revision) but still
    sends them. ``ctx.info`` nests two deprecated calls, the inner one raised only once awaited;
    calling the session's helper directly raises its warning at call time, silenced just there.
    On 2026-07-28 connections the message is sent only if the request opted in to that level.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        pending = ctx.session.send_log_message(level=level, data=message, related_request_id=ctx.request_id)
    await pending


async def _write_atomically(target: anyio.Path, data: bytes) -> None:
    # Write then rename: a reader never sees half a file, and concurrent or retried calls for the
    # same output each write their own temporary file, the last rename winning.
    partial = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    try:
        await partial.write_bytes(data)
        await partial.replace(target)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await partial.unlink(missing_ok=True)
        raise


async def list_markdown(folder: str, pattern: str = "*.md") -> MarkdownListing:
    """List the Markdown files in a folder, sorted, as absolute paths.

    `pattern` is a glob relative to the folder (default `*.md`; `**/*.md` recurses).
    """
    root = anyio.Path(folder)
    if not await root.is_dir():
        raise ToolError(f"not a folder: {folder}")
    root = await root.resolve()
    files = sorted([str(p) async for p in root.glob(pattern) if await p.is_file()])
    return MarkdownListing(folder=str(root), pattern=pattern, files=files, count=len(files))


async def convert_markdown(path: str, out_dir: str, ctx: Ctx) -> ConversionResult:
    """Convert one Markdown file to a complete HTML page, written to `<out_dir>/<stem>.html`.

    The page title is the document's first heading (the file name when it has none).
    """
    stages = 4
    source = anyio.Path(path)
    name = source.name
    await ctx.report_progress(0, stages, f"read {name}")
    try:
        text = await source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolError(f"Markdown file not found: {path}") from None
    except IsADirectoryError:
        raise ToolError(f"not a file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ToolError(f"not UTF-8 text: {path} ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    source = await source.resolve()

    await ctx.report_progress(1, stages, f"parse {name}")
    page, title, had_heading = render_markdown(text, fallback_title=source.stem)
    if not had_heading:
        await tool_log(ctx, "warning", f"{name} has no heading; titled it {title!r}")

    await ctx.report_progress(2, stages, f"render {name}")
    data = page.encode("utf-8")
    target_dir = anyio.Path(out_dir)
    try:
        await target_dir.mkdir(parents=True, exist_ok=True)
        target_dir = await target_dir.resolve()
        output = target_dir / f"{source.stem}.html"
        await ctx.report_progress(3, stages, f"write {output.name}")
        await _write_atomically(output, data)
    except OSError as exc:
        raise ToolError(f"cannot write into {out_dir}: {exc.strerror or exc}") from None

    await ctx.report_progress(stages, stages, f"done {name}")
    await tool_log(ctx, "info", f"converted {name} -> {output.name} ({len(data)} bytes)")
    return ConversionResult(source=str(source), output=str(output), bytes=len(data), title=title)


def _summary_entries(results: Sequence[dict[str, Any] | str], base: Path) -> list[SummaryEntry]:
    entries: list[SummaryEntry] = []
    for i, item in enumerate(results):
        title: object = None
        if isinstance(item, str):
            output: object = item
        else:
            output = item.get("output") or item.get("path")
            title = item.get("title")
        if not isinstance(output, str) or not output:
            keys = sorted(item) if isinstance(item, dict) else item
            raise ToolError(f"results[{i}] has no 'output' path: {keys!r}")
        target = Path(output)
        if not target.is_absolute():
            target = Path.cwd() / target
        rel = PurePosixPath(*Path(os.path.relpath(target, base)).parts)
        entries.append(SummaryEntry(title=str(title) if title else target.stem, href=quote(str(rel), safe="/._-~")))
    return entries


def _summary_markdown(title: str, entries: Sequence[SummaryEntry]) -> str:
    def md_text(s: str) -> str:
        return re.sub(r"([\\`*_\[\]<>])", r"\\\1", s)

    lines = [f"# {md_text(title)}", "", f"{len(entries)} documents.", ""]
    lines += [f"- [{md_text(e.title)}]({e.href})" for e in entries]
    return "\n".join(lines) + "\n"


def _summary_html(title: str, entries: Sequence[SummaryEntry]) -> str:
    items = "".join(f'<li><a href="{html.escape(e.href)}">{html.escape(e.title)}</a></li>\n' for e in entries)
    body = f"<h1>{html.escape(title)}</h1>\n<p>{len(entries)} documents.</p>\n<ul>\n{items}</ul>\n"
    return _HTML_PAGE.format(mdit_version=package_version("markdown-it-py"), title=html.escape(title), body=body)


async def write_summary(
    path: str, results: list[dict[str, Any] | str], ctx: Ctx, title: str = "Converted documents"
) -> SummaryResult:
    """Write an index linking every converted page.

    `results` holds convert_markdown results (objects with `output`, optionally `title`) or bare
    output paths. The index is Markdown when `path` ends in `.md`, HTML otherwise; links are
    relative to the index's folder.
    """
    target = anyio.Path(path)
    try:
        await target.parent.mkdir(parents=True, exist_ok=True)
        target = await target.resolve()
        entries = _summary_entries(results, Path(str(target.parent)))
        text = _summary_markdown(title, entries) if target.suffix.lower() == ".md" else _summary_html(title, entries)
        await _write_atomically(target, text.encode("utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    await tool_log(ctx, "info", f"wrote {target.name} linking {len(entries)} pages")
    return SummaryResult(path=str(target), count=len(entries), entries=entries)


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def build_server() -> MCPServer:
    """The demo server with its four tools registered."""
    server: MCPServer = MCPServer(
        SERVER_NAME,
        title="mcp-run demo: Markdown to HTML",
        instructions="Batch-convert Markdown to HTML: list_markdown, convert_markdown each, write_summary.",
        version=__version__,
        log_level="WARNING",
    )
    server.add_tool(list_markdown, title="List Markdown files", annotations=READ_ONLY)
    server.add_tool(convert_markdown, title="Convert Markdown to HTML", annotations=WRITES_OWN_OUTPUT)
    server.add_tool(write_summary, title="Write an index of converted pages", annotations=WRITES_OWN_OUTPUT)
    server.add_tool(echo, title="Echo", annotations=READ_ONLY)
    return server


# --------------------------------------------------------------------------------------------------
# Streamable HTTP on a loopback socket we bound ourselves (so --port 0 can be reported)


class _AnnouncingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, line: str) -> None:
        super().__init__(config)
        self._line = line

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            print(self._line, file=sys.stderr, flush=True)


def _loopback_socket(host: str, port: int) -> socket.socket:
    address = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
    if not address.is_loopback:
        raise ValueError(f"refusing to listen on {host}: the demo server binds loopback addresses only")
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket's protocol says TCP; with 0, every reused keep-alive connection waits ~40 ms for delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((str(address), port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_streamable_http(
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    json_response: bool = False,
    event_store: EventStore | None = None,
    retry_interval: int | None = None,
) -> None:
    """Serve ``server`` over Streamable HTTP at ``/mcp`` until SIGINT/SIGTERM.

    Binds a loopback address only, then prints :data:`LISTENING_LINE` to stderr once uvicorn
    accepts connections.
    """
    sock = _loopback_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    url = f"http://{url_host}:{bound_port}/mcp"
    app = server.streamable_http_app(
        json_response=json_response,
        event_store=event_store,
        retry_interval=retry_interval,
        host=bound_host,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=3)
    with sock:
        await _AnnouncingServer(config, LISTENING_LINE.format(url=url)).serve(sockets=[sock])


def add_http_arguments(parser: argparse.ArgumentParser) -> None:
    """The HTTP options shared by the demo server and the test peer."""
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    parser.add_argument("--resumable", action="store_true", help="keep SSE events in memory for resumption")
    parser.add_argument("--json-response", action="store_true", help="answer POSTs with JSON instead of SSE streams")
    parser.add_argument("--retry-interval", type=int, default=None, metavar="MS", help="SSE retry: hint for clients")


def run_http(server: MCPServer, args: argparse.Namespace) -> None:
    """Serve over Streamable HTTP with the options of :func:`add_http_arguments`."""
    store = InMemoryEventStore() if args.resumable else None

    async def serve() -> None:
        await serve_streamable_http(
            server,
            host=args.host,
            port=args.port,
            json_response=args.json_response,
            event_store=store,
            retry_interval=args.retry_interval,
        )

    anyio.run(serve)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mcp-run-demo", description="mcp-run's demo MCP server: Markdown to HTML.")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    add_http_arguments(parser)
    args = parser.parse_args(argv)
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        try:
            run_http(server, args)
        except ValueError as exc:
            parser.error(str(exc))
        except KeyboardInterrupt:
            return 130
    return 0
