"""Finished OpenTelemetry spans as tests read them: the tree they form, and what a run's spans must show whichever
executor ran it (tests/test_telemetry.py runs locally, tests/temporal/test_telemetry_temporal.py on Temporal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The spans as an indented tree, children in the order they started."""
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append("  " * depth + span.name)
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def child_names(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[str]:
    assert parent.context is not None
    return sorted(s.name for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id)


def check_request_span(call: ReadableSpan, tool: str) -> dict[str, Any]:
    """``call`` is the client span of a ``tools/call`` of ``tool`` over a stdio pipe that succeeded, with the MCP
    conventions' attributes; returns its attributes."""
    assert call.kind is SpanKind.CLIENT
    attributes = dict(call.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == tool
    assert attributes["network.transport"] == "pipe"
    assert attributes["mcp.protocol.version"]
    assert "error.type" not in attributes
    return attributes


def check_failed_calls(spans: Sequence[ReadableSpan], *, tool: str, item: str, step: str, run: str, calls: int) -> None:
    """The spans of a run whose ``calls`` calls of ``tool`` all answered with a tool error: each request's
    ``error.type`` is ``tool_error`` (the MCP conventions' word), item ``item``'s the failure kind
    (``tool-error``); the requests, the item, step ``step`` and run ``run`` are errors, the run's exit code 1."""
    requests = named(spans, f"tools/call {tool}")
    assert len(requests) == calls
    assert all(c.attributes is not None and c.attributes["error.type"] == "tool_error" for c in requests)
    assert all(c.status.status_code is StatusCode.ERROR for c in requests)
    (failed,) = named(spans, f"item {item}")
    assert failed.attributes is not None and failed.attributes["error.type"] == "tool-error"
    assert failed.status.status_code is StatusCode.ERROR
    (stepped,) = named(spans, f"step {step}")
    assert stepped.status.status_code is StatusCode.ERROR
    (ran,) = named(spans, f"run {run}")
    assert ran.status.status_code is StatusCode.ERROR and ran.attributes is not None
    assert ran.attributes["mcp_run.exit_code"] == 1
