"""OpenTelemetry traces of a run on Temporal (runner.temporal.tracing): the same tree as a local run's
(tests/test_telemetry.py), run > step > item > ``tools/call <tool>``, with the client's run and step spans and
the worker's item and request spans in one trace, carried by Temporal's tracing interceptor; the MCP attributes
on each request span and its context in ``params._meta``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner.engine.core.outcome import Outcome
from runner.engine.run import RunOptions
from runner.engine.telemetry.otel import Tracing
from runner.engines import RunRequest, TemporalOptions
from runner.temporal.engine import TemporalEngine
from runner.temporal.worker import start_worker
from tests.spans import check_failed_calls, check_request_span, child_names, named, tree
from tests.temporal.support import dev_server, fan_out_workflow, target_of

pytestmark = pytest.mark.slow


def provider_into(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def run_traced(path: Path, exporter: InMemorySpanExporter) -> Outcome:
    """The workflow run on Temporal by a traced client and a traced in-process worker (two tracer providers, as
    two processes would have, exporting to one place)."""

    async def main() -> Outcome:
        async with dev_server() as env:
            worker, thread = start_worker(env.client, "traced", tracing=Tracing(provider_into(exporter)))
            try:
                async with worker:
                    options = TemporalOptions(address=target_of(env), task_queue="traced")
                    tracing = Tracing(provider_into(exporter), remote_items=True)
                    engine = TemporalEngine(options, tracing=tracing)
                    return await asyncio.wait_for(engine.start_and_follow(RunRequest(path, RunOptions())), 120)
            finally:
                thread.stop()

    return asyncio.run(main())


def test_a_run_on_temporal_is_the_tree_of_a_local_run(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    outcome = run_traced(fan_out_workflow(tmp_path, 3), exporter)
    assert int(outcome.exit_code) == 0
    spans = exporter.get_finished_spans()
    (run,) = named(spans, "run fan-out")
    assert run.context is not None and run.attributes is not None
    assert run.attributes["mcp_run.run_id"] == outcome.run_id
    assert run.attributes["mcp_run.status"] == "succeeded"
    ours = [s for s in spans if s.context is not None and s.context.trace_id == run.context.trace_id]
    shown = tree(ours)
    print("\n".join(shown))
    assert shown[0] == "run fan-out"
    (step,) = named(ours, "step call")
    assert step.parent is not None and step.parent.span_id == run.context.span_id
    assert step.attributes is not None and step.attributes["mcp_run.step.succeeded"] == 3
    assert child_names(ours, step) == ["item k0000", "item k0001", "item k0002"]
    (item,) = named(ours, "item k0001")
    assert item.attributes is not None and item.attributes["mcp_run.status"] == "succeeded"
    assert item.attributes["gen_ai.tool.name"] == "echo"
    assert "tools/call echo" in child_names(ours, item)
    assert step.start_time is not None and item.start_time is not None and step.start_time <= item.start_time

    (call,) = [s for s in named(ours, "tools/call echo") if _child_of(s, item)]
    check_request_span(call, "echo")
    # Temporal's own spans (the interceptor's) are in the same trace, under the run.
    assert any(name.startswith("StartWorkflow:") for name in child_names(ours, run))
    assert any(s.name.startswith("RunActivity:") for s in ours)
    # Following the run (a query every half second) makes no spans.
    assert not any(s.name.startswith("QueryWorkflow:") for s in spans)


def _child_of(span: ReadableSpan, parent: ReadableSpan) -> bool:
    return span.parent is not None and parent.context is not None and span.parent.span_id == parent.context.span_id


def test_the_server_receives_the_request_spans_traceparent(tmp_path: Path) -> None:
    """The fake server in mode ``meta`` answers with the ``traceparent`` of ``params._meta``: the outputs hold the
    context of each item's ``tools/call`` span (SEP-414), as a local run sends it."""
    exporter = InMemorySpanExporter()
    outcome = run_traced(fan_out_workflow(tmp_path, 2, mode="meta"), exporter)
    assert int(outcome.exit_code) == 0
    calls = named(exporter.get_finished_spans(), "tools/call echo")
    sent = {f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-01" for s in calls if s.context is not None}
    assert set(outcome.outputs["texts"]) == sent and len(sent) == 2


def test_failures_carry_error_type_on_temporal_too(tmp_path: Path) -> None:
    """As tests/test_telemetry.py::test_failures_carry_error_type (the same checks): the request's
    ``error.type`` is ``tool_error``, the item's the failure kind, and the step and run spans are errors."""
    exporter = InMemorySpanExporter()
    outcome = run_traced(fan_out_workflow(tmp_path, 2, mode="tool-error"), exporter)
    assert int(outcome.exit_code) == 1
    check_failed_calls(exporter.get_finished_spans(), tool="echo", item="k0000", step="call", run="fan-out", calls=2)
