"""OpenTelemetry traces of a run, opt-in: ``pip install 'mcp-batch-run[otel]'`` and the standard ``OTEL_*`` variables.

Tracing is on when any of ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_TRACES_EXPORTER`` is set (and ``OTEL_SDK_DISABLED`` is not ``true``); otherwise nothing of
``opentelemetry`` is imported. What a traced run sends (:mod:`runner.engine.telemetry.otel`):

- a span per run attempt (``run <workflow>``), per step (``step <id>``) and per item (``item <key>``), fed by the
  run's typed events as a view is;
- a client span per MCP request, named and described as OpenTelemetry's MCP conventions say
  (``tools/call convert``; ``mcp.method.name``, ``jsonrpc.request.id``, ``error.type``, ``mcp.protocol.version``,
  ``mcp.session.id``, ``network.transport``, ``gen_ai.tool.name``), its context sent in the request's
  ``params._meta`` as ``traceparent``/``tracestate`` (SEP-414), and the histogram
  ``mcp.client.operation.duration`` (seconds) when metrics are exported too;
- a resumed run's span links to the run spans of the attempts before it (their ``traceparent`` is journaled, in
  ``run_started`` and ``run_resumed``).

The exporter is OTLP over HTTP (protobuf), as the SDK configures it from the environment
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``..._HEADERS``, ``OTEL_SERVICE_NAME``, ...); ``OTEL_TRACES_EXPORTER=console``
prints spans to stderr instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from runner.engine.telemetry.otel import Tracing

__all__ = ["TRACING_VARIABLES", "from_env", "wanted"]

TRACING_VARIABLES: Final = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)
INSTALL_HINT: Final = "pip install 'mcp-batch-run[otel]'"


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces (see the module docstring). Imports nothing."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return any(environ.get(name, "").strip() for name in TRACING_VARIABLES)


def from_env(
    environ: Mapping[str, str], *, warn: Callable[[str], None] | None = None, remote_items: bool = False
) -> Tracing | None:
    """The run's tracing as the environment configures it; None when it asks for none, or when the ``otel``
    extra is not installed (``warn`` says so: the variables may be meant for another program, and a run is no
    less useful untraced). ``remote_items``: a run on Temporal, whose items its workers trace."""
    if not wanted(environ):
        return None
    try:
        from runner.engine.telemetry.otel import Tracing
    except ImportError as exc:
        if warn is not None:
            warn(f"OTEL_* variables are set but OpenTelemetry is not installed ({exc.name}); {INSTALL_HINT}")
        return None
    return Tracing.from_env(environ, remote_items=remote_items)
