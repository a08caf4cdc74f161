"""OpenTelemetry traces of a run (runner.engine.telemetry): the span tree run > step > item > ``tools/call <tool>``
with the MCP conventions' attributes, the trace context in each request's ``params._meta``, the duration metric,
a resumed run's link to its earlier attempt, the OTLP/HTTP exporter against a local receiver, and tracing off
(nothing of opentelemetry imported) when no ``OTEL_*`` variable asks for it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner.engine.core.outcome import Outcome
from runner.engine.run import RunOptions, execute
from runner.engine.telemetry import from_env, wanted
from runner.engine.telemetry.otel import Tracing
from runner.errors import UsageError
from tests.harness import CHAIN, Harness, echo_tools
from tests.spans import check_failed_calls, check_request_span, child_names, named, tree

ROOT = Path(__file__).resolve().parents[1]

FAILING = """
version: 1
servers:
  s: {command: [fake]}
steps:
  broken:
    server: s
    tool: fail
    for_each: ["a", "b"]
    args: {text: "${{ item }}"}
"""


def traced() -> tuple[Tracing, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    return Tracing(provider, MeterProvider(metric_readers=[metrics])), spans, metrics


async def run_traced(tmp_path: Path, text: str, harness: Harness, tracing: Tracing, **options: Any) -> Outcome:
    path = tmp_path / "wf.yaml"
    path.write_text(text)
    with trio.fail_after(30):
        return await execute(
            path,
            RunOptions(state_dir=tmp_path / "state", **options),
            opener=lambda plan, inputs, env: harness.opener,
            tracing=tracing,
        )


async def test_a_run_is_a_tree_of_spans_with_the_mcp_attributes(tmp_path: Path) -> None:
    tracing, exporter, metrics = traced()
    harness = Harness({"s": echo_tools})
    outcome = await run_traced(tmp_path, CHAIN, harness, tracing)
    assert int(outcome.exit_code) == 0
    spans = exporter.get_finished_spans()
    shown = tree(spans)
    assert shown[0] == "run wf"
    assert [line.strip() for line in shown if line.startswith("  step")] == [
        "step files",
        "step convert",
        "step report",
    ]
    (run,) = named(spans, "run wf")
    assert {s.context.trace_id for s in spans if s.context is not None} == {run.context.trace_id}  # type: ignore[union-attr]
    assert run.attributes is not None and run.attributes["mcp_run.run_id"] == outcome.run_id
    (convert,) = named(spans, "step convert")
    assert child_names(spans, convert) == ["item f0", "item f1", "item f2", "item f3"]
    (item,) = named(spans, "item f2")
    assert child_names(spans, item) == ["tools/call upper"]
    assert item.attributes is not None and item.attributes["mcp_run.status"] == "succeeded"
    # The session's own requests hang from the run.
    assert "initialize" in child_names(spans, run)

    (call,) = [s for s in named(spans, "tools/call upper") if s.parent and s.parent.span_id == item.context.span_id]  # type: ignore[union-attr]
    attributes = check_request_span(call, "upper")
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    # The server got the span's context in params._meta (SEP-414), beside the progress token.
    rid = attributes["jsonrpc.request.id"]
    (sent,) = [c for c in harness.calls("s") if str(c.id) == rid]
    meta = sent.params["_meta"]
    assert call.context is not None
    assert meta["traceparent"].startswith(f"00-{call.context.trace_id:032x}-{call.context.span_id:016x}-")
    assert meta["progressToken"] == sent.id

    # The duration histogram, per method and tool.
    data = metrics.get_metrics_data()
    assert data is not None
    points = [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "mcp.client.operation.duration" and m.unit == "s"
        for p in m.data.data_points  # type: ignore[union-attr]
    ]
    upper = [p for p in points if p.attributes.get("gen_ai.tool.name") == "upper"]  # type: ignore[union-attr]
    assert sum(p.count for p in upper) == 4  # type: ignore[attr-defined]


async def test_failures_carry_error_type(tmp_path: Path) -> None:
    tracing, exporter, _ = traced()
    outcome = await run_traced(tmp_path, FAILING, Harness({"s": echo_tools}), tracing)
    assert int(outcome.exit_code) == 1
    check_failed_calls(exporter.get_finished_spans(), tool="fail", item="a", step="broken", run="wf", calls=2)


async def test_a_resumed_run_links_to_the_attempt_it_continues(tmp_path: Path) -> None:
    tracing, exporter, _ = traced()
    first = await run_traced(tmp_path, FAILING, Harness({"s": echo_tools}), tracing)
    tracing2, exporter2, _ = traced()
    again = await run_traced(tmp_path, FAILING, Harness({"s": echo_tools}), tracing2, retry_failed=True)
    assert again.run_id == first.run_id
    (run1,) = named(exporter.get_finished_spans(), "run wf")
    (run2,) = named(exporter2.get_finished_spans(), "run wf")
    assert run1.context is not None and run2.context is not None
    assert run2.context.trace_id != run1.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in run2.links] == [
        (run1.context.trace_id, run1.context.span_id)
    ]
    assert run2.attributes is not None and run2.attributes["mcp_run.attempt"] == 2
    # Each attempt's first record names its run span (an optional field: older readers ignore it).
    assert first.run_dir is not None
    records = [json.loads(line) for line in (first.run_dir / "journal.jsonl").read_text().splitlines()]
    opened = [r for r in records if r["type"] in ("run_started", "run_resumed")]
    assert [r["traceparent"].split("-")[2] for r in opened] == [
        f"{run1.context.span_id:016x}",
        f"{run2.context.span_id:016x}",
    ]


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
    ],
)
def test_tracing_is_on_only_when_the_environment_asks(environ: dict[str, str], on: bool) -> None:
    assert wanted(environ) is on


def test_an_untraced_run_imports_no_opentelemetry(tmp_path: Path) -> None:
    """A real run (the CLI, a stdio server) with no OTEL_* variable loads nothing of opentelemetry."""
    workflow = tmp_path / "wf.yaml"
    modes = ROOT / "tests" / "fakes" / "mcp_modes.py"
    workflow.write_text(
        "version: 1\n"
        f"servers:\n  s: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(modes))}, ok]}}\n"
        "steps:\n  one: {server: s, tool: echo, args: {text: hi}}\n"
    )
    code = (
        "import contextlib, io, sys\n"
        "from runner.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    code = main([{str(workflow)!r}, '--state-dir', {str(tmp_path / 'state')!r}, '--no-progress'])\n"
        "assert code == 0, code\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'runner.engine.telemetry.'))))"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.strip() == "[]"


# -- OTLP over HTTP, to a receiver on loopback ----------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    requests: list[ExportTraceServiceRequest]

    def do_POST(self) -> None:  # the OTLP/HTTP traces endpoint
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf":
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            type(self).requests.append(message)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    handler = type("Receiver", (_Receiver,), {"requests": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    finally:
        server.shutdown()
        server.server_close()


async def test_spans_reach_an_otlp_http_receiver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: tuple[str, list[ExportTraceServiceRequest]]
) -> None:
    endpoint, requests = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "batch-docs")
    path = tmp_path / "wf.yaml"
    path.write_text(CHAIN)
    harness = Harness({"s": echo_tools})
    with trio.fail_after(30):  # tracing from the environment: execute() builds it, and flushes it at the end
        outcome = await execute(
            path, RunOptions(state_dir=tmp_path / "state"), opener=lambda plan, inputs, env: harness.opener
        )
    assert int(outcome.exit_code) == 0
    spans = [s for r in requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]
    services = {
        a.value.string_value for r in requests for rs in r.resource_spans for a in rs.resource.attributes
        if a.key == "service.name"
    }  # fmt: skip
    assert services == {"batch-docs"}
    by_id = {s.span_id: s for s in spans}
    (call,) = [s for s in spans if s.name == "tools/call upper" and by_id[s.parent_span_id].name == "item f1"]
    item = by_id[call.parent_span_id]
    step = by_id[item.parent_span_id]
    run = by_id[step.parent_span_id]
    assert (step.name, run.name, run.parent_span_id) == ("step convert", "run wf", b"")
    attributes = {a.key: a.value.string_value for a in call.attributes}
    assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == "upper"
    assert len(spans) == len(by_id) > 15


# -- the official SDK server receives the trace context ---------------------------------------------------

SDK_SERVER = ROOT / "tests" / "peers" / "sdk_server.py"


@pytest.mark.integration
@pytest.mark.parametrize("how", ["stdio", "http-2025", "http-2026"])
async def test_the_sdk_server_receives_the_traceparent(tmp_path: Path, how: str) -> None:
    """A traced run against the official SDK's server (tests/peers/sdk_server.py, its ``meta`` tool echoes
    ``_meta``): the request's ``traceparent`` names its ``tools/call meta`` span, over stdio and HTTP."""
    from tests.integration.peers import sdk_http_server

    tracing, exporter, _ = traced()
    async with AsyncExitStack() as stack:
        if how == "stdio":
            server = f"{{command: [{json.dumps(sys.executable)}, {json.dumps(str(SDK_SERVER))}, stdio]}}"
        else:
            running = await stack.enter_async_context(sdk_http_server())
            # Pinned both ways: under `auto` a call not safe to repeat picks 2025-11-25 from this dual-era server.
            pin = ", protocol: '2025-11-25'" if how == "http-2025" else ", protocol: '2026-07-28'"
            server = f"{{url: {json.dumps(running.url)}{pin}}}"
        path = tmp_path / "wf.yaml"
        path.write_text(
            f"version: 1\nservers:\n  s: {server}\nsteps:\n  look: {{server: s, tool: meta}}\n"
            "outputs:\n  meta: ${{ steps.look.text }}\n"
        )
        with trio.fail_after(60):
            outcome = await execute(path, RunOptions(state_dir=tmp_path / "state"), tracing=tracing)
    assert int(outcome.exit_code) == 0, outcome.failures
    assert outcome.outputs is not None
    received = json.loads(outcome.outputs["meta"])
    spans = exporter.get_finished_spans()
    (call,) = named(spans, "tools/call meta")
    assert call.context is not None and call.attributes is not None
    assert received["traceparent"].startswith(f"00-{call.context.trace_id:032x}-{call.context.span_id:016x}-")
    assert call.attributes["network.transport"] == ("pipe" if how == "stdio" else "tcp")
    assert call.attributes["mcp.protocol.version"] == ("2025-11-25" if how == "http-2025" else "2026-07-28")
    if how == "http-2025":
        assert call.attributes["mcp.session.id"]
    (item,) = named(spans, "item")
    assert call.parent is not None and item.context is not None and call.parent.span_id == item.context.span_id


def test_without_the_extra_a_traced_run_warns_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "runner.engine.telemetry.otel", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # importing it raises ImportError
    warnings: list[str] = []
    assert from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, warn=warnings.append) is None
    assert warnings == [
        "OTEL_* variables are set but OpenTelemetry is not installed (opentelemetry); pip install 'mcp-batch-run[otel]'"
    ]


def test_an_exporter_mcp_run_does_not_ship_is_refused() -> None:
    with pytest.raises(UsageError, match=r"OTEL_TRACES_EXPORTER='zipkin': mcp-run exports with otlp, console, none"):
        Tracing.from_env({"OTEL_TRACES_EXPORTER": "zipkin"})
