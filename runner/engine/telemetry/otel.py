"""The OpenTelemetry side of a traced run (see :mod:`runner.engine.telemetry`): imported only when tracing is on.

One :class:`Tracing` per run. Its spans::

    run <workflow>                    (the attempt; links to the earlier attempts' run spans)
      step <id>                       (StepStarted .. StepFinished; a skipped step is a span of no length)
        item <key>                    (its first request or dispatch .. its result or last failure; a
                                       single call's item has no key: ``item``)
          tools/call <tool>           (CLIENT: one per request sent, each attempt its own)
      initialize, tools/list, ...     (a session's own requests hang from the run)

Run, step and item spans follow the run's events (:meth:`Tracing.observe`, an observer of the event log, as a
view is); a request's span is opened by the session around the request (:meth:`Tracing.request`, the session's
:data:`~runner.session.options.RequestTracer`), under the span of the item the current task is calling for
(:data:`~runner.engine.calls.current.CURRENT_ITEM`), and its context goes into the request's ``params._meta``.

A run on Temporal makes the same tree in two places (``Tracing(..., remote_items=True)``): the client that
started the run makes the run span and, from the events it follows, the step spans, timed by the events; the
workers make the item spans (:meth:`Tracing.item`, around an activity's call of an item) and the request spans
under them. A step span's id is derived from the trace and the step (:func:`step_span_id`), so a worker hangs an
item from its step knowing only the trace, which Temporal's tracing interceptor carries to the activity.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from types import TracebackType
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from runner import __version__
from runner.engine.calls.current import CURRENT_ITEM
from runner.engine.core.events import (
    Entry,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    RunFinished,
    RunInterrupted,
    RunStopped,
    SessionFailed,
    SessionLost,
    SessionOpened,
    StepFinished,
    StepSkipped,
    StepStarted,
)
from runner.engine.core.vocabulary import StepStatus
from runner.errors import CallTimeout, JsonRpcError, UsageError
from runner.session.options import RequestInfo

__all__ = ["DURATION_BUCKETS", "ItemSpan", "Tracing", "active_trace_id", "step_span_id"]

DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""``mcp.client.operation.duration``'s bucket boundaries, as the MCP conventions advise (seconds)."""
MAX_LINKS: Final = 32  # a run resumed more often links to its latest attempts
_EXPORTERS: Final = ("otlp", "console", "none")
_NAME_OF: Final = {"tools/call": "name", "prompts/get": "name"}  # the params key naming a request's target
_ITEM_SPAN: ContextVar[Span | None] = ContextVar("_ITEM_SPAN", default=None)  # a worker's item (Tracing.item)


def step_span_id(trace_id: int, step: str) -> int:
    """The span id of step ``step``'s span in trace ``trace_id`` (a run on Temporal: see the module docstring)."""
    digest = hashlib.sha256(f"{trace_id:032x}/{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1  # (0 is no span id)


def active_trace_id() -> int | None:
    """The trace of the current context (an activity's, as Temporal's tracing interceptor sets it); None: none."""
    context = trace.get_current_span().get_span_context()
    return context.trace_id if context.is_valid else None


class _PresetIds(RandomIdGenerator):  # (the type the SDK's provider declares)
    """The provider's id generator, but for the span id preset for the next span (a step's, derived)."""

    def __init__(self, ids: IdGenerator) -> None:
        self._ids = ids
        self.next_span_id: int | None = None

    def generate_span_id(self) -> int:
        preset, self.next_span_id = self.next_span_id, None
        return preset if preset is not None else self._ids.generate_span_id()

    def generate_trace_id(self) -> int:
        return self._ids.generate_trace_id()


class Tracing:
    """A run's spans and metrics (see the module docstring), sent through ``tracer_provider`` (and
    ``meter_provider``, for ``mcp.client.operation.duration``). Tests pass providers with in-memory
    exporters; a run uses :meth:`from_env`. ``remote_items``: the run is on Temporal, its items traced by the
    workers (the module docstring): the item events are not traced here, step spans have derived ids and the
    times of their events."""

    def __init__(
        self,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider | None = None,
        *,
        remote_items: bool = False,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._remote_items = remote_items
        self._ids = _PresetIds(tracer_provider.id_generator)
        tracer_provider.id_generator = self._ids  # (before the tracer is made: it keeps the provider's)
        self._tracer = tracer_provider.get_tracer("mcp-run", __version__)
        self._duration: Histogram | None = None
        if meter_provider is not None:
            self._duration = meter_provider.get_meter("mcp-run", __version__).create_histogram(
                "mcp.client.operation.duration",
                unit="s",
                description="The duration of the MCP request or notification as observed on the sender from the "
                "time it was sent until the response or ack is received.",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            )
        self._propagator = TraceContextTextMapPropagator()
        self._run: Span | None = None
        self._run_context: Context | None = None
        self._steps: dict[str, Span] = {}
        self._items: dict[tuple[str, str], Span] = {}

    @property
    def tracer(self) -> trace.Tracer:
        """The tracer of the run's spans (Temporal's tracing interceptor makes its own spans with it)."""
        return self._tracer

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, remote_items: bool = False) -> Tracing:
        """As the ``OTEL_*`` variables say: OTLP over HTTP by default (``OTEL_TRACES_EXPORTER=console``: to
        stderr), service ``mcp-run`` unless ``OTEL_SERVICE_NAME`` (or ``OTEL_RESOURCE_ATTRIBUTES``) names one;
        metrics when an OTLP endpoint for them is set or ``OTEL_METRICS_EXPORTER`` asks."""
        named = "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        resource = Resource.create({} if named else {"service.name": "mcp-run"})
        provider = TracerProvider(resource=resource)
        for exporter in _span_exporters(environ):
            provider.add_span_processor(BatchSpanProcessor(exporter))
        readers = [PeriodicExportingMetricReader(e) for e in _metric_exporters(environ)]
        meters = SdkMeterProvider(resource=resource, metric_readers=readers) if readers else None
        return cls(provider, meters, remote_items=remote_items)

    # -- the run ---------------------------------------------------------------------------------------

    def begin(self, workflow: str, *, run_id: str | None, attempt: int, earlier: Sequence[str] = ()) -> str:
        """Open the run's span (a new trace) and return its ``traceparent``, which the run journals. ``earlier``:
        the ``traceparent`` of the run's earlier attempts, linked from this one."""
        links = [Link(context) for context in map(_span_context, earlier[-MAX_LINKS:]) if context is not None]
        attributes: dict[str, AttributeValue] = {"mcp_run.workflow": workflow, "mcp_run.attempt": attempt}
        if run_id is not None:
            attributes["mcp_run.run_id"] = run_id
        self._run = self._tracer.start_span(f"run {workflow}", context=Context(), attributes=attributes, links=links)
        self._run_context = trace.set_span_in_context(self._run)
        return self._carrier(self._run_context)["traceparent"]

    @contextmanager
    def in_run(self) -> Iterator[None]:
        """The run's span is the current one while this lasts (the parent of a Temporal run's start, whose
        context Temporal's tracing interceptor carries to the workflow and its activities)."""
        if self._run is None:
            yield
            return
        with trace.use_span(self._run, end_on_exit=False):
            yield

    def observe(self, entry: Entry) -> None:
        """Open and close the spans the run's events call for (an observer of its event log)."""
        event = entry.event
        if self._remote_items and isinstance(event, ItemDispatched | ItemSucceeded | ItemFailed):
            return  # traced by the workers (Tracing.item)
        if isinstance(event, ItemDispatched):
            span = self._item(event.step, event.item)
            span.set_attributes({"mcp_run.server": event.server, "gen_ai.tool.name": event.tool})
            span.set_attribute("mcp_run.attempts", event.attempt)
        elif isinstance(event, ItemSucceeded):
            self._item_ended(event.step, event.item, "succeeded")
        elif isinstance(event, ItemFailed):
            if event.retrying:
                attributes: dict[str, AttributeValue] = {"error.type": str(event.kind), "message": event.error}
                if event.retry_in is not None:
                    attributes["mcp_run.retry_in"] = event.retry_in
                self._item(event.step, event.item).add_event("retrying", attributes)
            else:
                self._item_ended(event.step, event.item, "failed", error=str(event.kind), message=event.error)
        elif isinstance(event, StepStarted):
            self._step_started(event, self._time_of(entry))
        elif isinstance(event, StepFinished):
            self._step_finished(event, self._time_of(entry))
        elif isinstance(event, StepSkipped):
            at = self._time_of(entry)
            self._preset(event.step)
            span = self._tracer.start_span(f"step {event.step}", context=self._run_context, start_time=at)
            span.set_attributes({"mcp_run.step": event.step, "mcp_run.status": "skipped", "message": event.reason})
            span.end(end_time=at)
        elif isinstance(event, SessionOpened | SessionLost | SessionFailed) and self._run is not None:
            what: dict[str, AttributeValue] = {"mcp_run.server": event.server}
            if isinstance(event, SessionOpened) and event.protocol_version is not None:
                what["mcp.protocol.version"] = event.protocol_version
            elif isinstance(event, SessionLost | SessionFailed):
                what["message"] = event.error
            self._run.add_event(event.type, what)
        elif isinstance(event, RunFinished | RunStopped | RunInterrupted):
            self._run_ended(str(event.status), event.exit_code)

    def end(self, error: BaseException | None = None) -> None:
        """Close what is still open (a run that ended by an error, items left in doubt); idempotent."""
        for span in self._items.values():
            span.set_attribute("mcp_run.status", "unfinished")
            span.end()
        self._items.clear()
        for span in self._steps.values():
            span.end()
        self._steps.clear()
        if self._run is not None:
            if error is not None:
                self._run.record_exception(error)
                self._run.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            self._run.end()
            self._run = None

    def shutdown(self) -> None:
        """Send what is buffered and stop the exporters (blocking: a run calls it in a thread)."""
        self._tracer_provider.shutdown()
        if isinstance(self._meter_provider, SdkMeterProvider):
            self._meter_provider.shutdown()

    # -- requests --------------------------------------------------------------------------------------

    @contextmanager
    def item(self, trace_id: int, step: str, key: str, *, server: str, tool: str) -> Iterator[ItemSpan]:
        """A worker's span of item ``key`` of ``step`` in trace ``trace_id`` (a run on Temporal), around its call:
        the current item while it lasts, so that its requests hang from it; ended with the status set on the
        :class:`ItemSpan` (``unfinished`` if none)."""
        parent = SpanContext(trace_id, step_span_id(trace_id, step), is_remote=True, trace_flags=TraceFlags(1))
        span = self._item_span(step, key, trace.set_span_in_context(NonRecordingSpan(parent)))
        span.set_attributes({"mcp_run.server": server, "gen_ai.tool.name": tool})
        item, token, current = ItemSpan(span), _ITEM_SPAN.set(span), CURRENT_ITEM.set((step, key))
        try:
            yield item
        finally:
            CURRENT_ITEM.reset(current)
            _ITEM_SPAN.reset(token)
            if item.status is None:
                span.set_attribute("mcp_run.status", "unfinished")
                span.end()

    def request(self, info: RequestInfo) -> _ClientSpan:
        """The span of one request (a :data:`~runner.session.options.RequestTracer`)."""
        key = CURRENT_ITEM.get()
        held = _ITEM_SPAN.get() if key is not None else None  # a worker's item (a session's own task clears the key)
        if held is not None:
            parent: Context | None = trace.set_span_in_context(held)
        else:
            parent = trace.set_span_in_context(self._item(*key)) if key is not None else self._run_context
        target_key = _NAME_OF.get(info.method)
        target = info.params.get(target_key) if target_key is not None and info.params is not None else None
        attributes: dict[str, AttributeValue] = {
            "mcp.method.name": info.method,
            "jsonrpc.request.id": str(info.request_id),
            "network.transport": info.transport,
        }
        if info.protocol_version is not None:
            attributes["mcp.protocol.version"] = info.protocol_version
        if info.session_id is not None:
            attributes["mcp.session.id"] = info.session_id
        name = info.method
        if isinstance(target, str):
            name = f"{info.method} {target}"
            if info.method == "tools/call":
                attributes["gen_ai.tool.name"] = target
                attributes["gen_ai.operation.name"] = "execute_tool"
            else:
                attributes["gen_ai.prompt.name"] = target
        span = self._tracer.start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attributes)
        span.set_attribute("mcp_run.server", info.server)
        return _ClientSpan(span, self._carrier(trace.set_span_in_context(span)), self._duration, attributes)

    # -- helpers ---------------------------------------------------------------------------------------

    def _carrier(self, context: Context) -> dict[str, str]:
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=context)
        return carrier

    def _time_of(self, entry: Entry) -> int | None:
        """When a Temporal run's event happened (ns since the epoch; what the client sees comes later); None for a
        local run's (now)."""
        if not self._remote_items:
            return None
        return int(datetime.fromisoformat(entry.ts.replace("Z", "+00:00")).timestamp() * 1e9)

    def _preset(self, step: str) -> None:
        """A Temporal run's step span gets the id the workers derive (:func:`step_span_id`)."""
        if self._remote_items and self._run is not None:
            self._ids.next_span_id = step_span_id(self._run.get_span_context().trace_id, step)

    def _step_started(self, event: StepStarted, at: int | None = None) -> None:
        old = self._steps.pop(event.step, None)
        if old is not None:
            old.end(end_time=at)
        attributes: dict[str, AttributeValue] = {"mcp_run.step": event.step}
        if event.items is not None:
            attributes["mcp_run.step.items"] = event.items
        if event.reused:
            attributes["mcp_run.step.reused"] = event.reused
        self._preset(event.step)
        self._steps[event.step] = self._tracer.start_span(
            f"step {event.step}", context=self._run_context, attributes=attributes, start_time=at
        )

    def _step_finished(self, event: StepFinished, at: int | None = None) -> None:
        span = self._steps.pop(event.step, None)
        if span is None:
            return
        span.set_attribute("mcp_run.status", str(event.status))
        for name, count in event.counts.items():
            span.set_attribute(f"mcp_run.step.{name}", count)
        if event.status not in (StepStatus.SUCCEEDED, StepStatus.SKIPPED):
            if event.kind is not None:
                span.set_attribute("error.type", str(event.kind))
            span.set_status(Status(StatusCode.ERROR, event.error or str(event.status)))
        span.end(end_time=at)

    def _item(self, step: str, key: str) -> Span:
        """The item's span, opened on first use (its first request, or its dispatch)."""
        span = self._items.get((step, key))
        if span is None:
            parent = self._steps.get(step)
            context = trace.set_span_in_context(parent) if parent is not None else self._run_context
            span = self._items[(step, key)] = self._item_span(step, key, context)
        return span

    def _item_span(self, step: str, key: str, context: Context | None) -> Span:
        return self._tracer.start_span(
            f"item {key}" if key else "item", context=context, attributes={"mcp_run.step": step, "mcp_run.item": key}
        )

    def _item_ended(self, step: str, key: str, status: str, *, error: str | None = None, message: str = "") -> None:
        span = self._items.pop((step, key), None) or self._item_now(step, key)
        _end_item(span, status, error=error, message=message)

    def _item_now(self, step: str, key: str) -> Span:
        """The span of an item that ends before it was dispatched (refused, its arguments failed)."""
        span = self._item(step, key)
        del self._items[(step, key)]
        return span

    def _run_ended(self, status: str, exit_code: int) -> None:
        if self._run is None:
            return
        self._run.set_attributes({"mcp_run.status": status, "mcp_run.exit_code": exit_code})
        if exit_code != 0:
            self._run.set_status(Status(StatusCode.ERROR, f"{status} (exit code {exit_code})"))
        self.end()


class ItemSpan:
    """A worker's item span (:meth:`Tracing.item`): :meth:`ended` sets its status and ends it."""

    __slots__ = ("_span", "status")

    def __init__(self, span: Span) -> None:
        self._span = span
        self.status: str | None = None

    def ended(self, status: str, *, error: str | None = None, message: str = "") -> None:
        self.status = status
        _end_item(self._span, status, error=error, message=message)


def _end_item(span: Span, status: str, *, error: str | None = None, message: str = "") -> None:
    """An item's span ends with its status; a failure's kind is its ``error.type``."""
    span.set_attribute("mcp_run.status", status)
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR, message))
    span.end()


class _ClientSpan:
    """One request's span, as the session's tracer hands it out (a :class:`~runner.session.options.TracedRequest`
    and its context manager): ``error.type`` is the JSON-RPC error code, ``tool_error`` for a result with
    ``isError``, ``timeout``, or the exception's class."""

    __slots__ = ("_attributes", "_duration", "_error", "_span", "_started", "meta")

    def __init__(
        self, span: Span, meta: dict[str, str], duration: Histogram | None, attributes: dict[str, AttributeValue]
    ) -> None:
        self._span = span
        self.meta = meta
        self._duration = duration
        self._attributes = attributes
        self._error: str | None = None
        self._started = time.perf_counter()

    def __enter__(self) -> _ClientSpan:
        return self

    def answered(self, result: Mapping[str, Any]) -> None:
        if result.get("isError") is True:
            self._error = "tool_error"

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        span, error = self._span, self._error
        if exc is not None:
            error = _error_type(exc)
            if isinstance(exc, JsonRpcError):
                span.set_attribute("rpc.response.status_code", str(exc.code))
            span.set_status(Status(StatusCode.ERROR, str(exc).split("\n", 1)[0]))
        elif error is not None:
            span.set_status(Status(StatusCode.ERROR, "the tool returned isError"))
        if error is not None:
            span.set_attribute("error.type", error)
        span.end()
        if self._duration is not None:
            attributes = {
                k: v for k, v in self._attributes.items() if k not in ("jsonrpc.request.id", "mcp.session.id")
            }
            if error is not None:
                attributes["error.type"] = error
            self._duration.record(time.perf_counter() - self._started, attributes)


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, JsonRpcError):
        return str(exc.code)
    if isinstance(exc, CallTimeout):
        return "timeout"
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _span_context(traceparent: str) -> SpanContext | None:
    """The span context a journaled ``traceparent`` names; None when it names none."""
    context = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    span_context = trace.get_current_span(context).get_span_context()
    return span_context if span_context.is_valid else None


def _names(environ: Mapping[str, str], variable: str, default: str) -> list[str]:
    names = [n.strip().lower() for n in environ.get(variable, default).split(",") if n.strip()]
    unknown = [n for n in names if n not in _EXPORTERS]
    if unknown:
        raise UsageError(f"{variable}={unknown[0]!r}: mcp-run exports with {', '.join(_EXPORTERS)}")
    return [n for n in names if n != "none"]


def _span_exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    exporters: list[SpanExporter] = []
    for name in _names(environ, "OTEL_TRACES_EXPORTER", "otlp"):
        if name == "console":
            exporters.append(ConsoleSpanExporter(out=sys.stderr))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())  # its endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
    return exporters


def _metric_exporters(environ: Mapping[str, str]) -> list[MetricExporter]:
    """Metrics only when asked: by ``OTEL_METRICS_EXPORTER``, or an OTLP endpoint that covers them (a traces
    endpoint alone does not: metrics would go to a default address nobody listens on)."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    if "OTEL_METRICS_EXPORTER" not in environ and not endpoint:
        return []
    exporters: list[MetricExporter] = []
    for name in _names(environ, "OTEL_METRICS_EXPORTER", "otlp"):
        if name == "console":
            exporters.append(ConsoleMetricExporter(out=sys.stderr))
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            exporters.append(OTLPMetricExporter())
    return exporters
