"""Traces of a run on Temporal (:mod:`runner.engine.telemetry`): the same tree as a local run's, made in two places.

- The client that starts the run opens its span and starts the workflow under it, through Temporal's tracing
  interceptor (``temporalio.contrib.opentelemetry.TracingInterceptor``), which carries the context to the
  workflow and from it to each activity (its own spans, ``StartWorkflow:...``, ``RunActivity:...``, are in the
  trace too); the step spans come from the events the client follows (:meth:`Tracing.observe`, as a local run's).
- A worker traced by the same variables makes, in each call activity, a span per item under its step's span
  (:meth:`Tracing.item`; the step's span id derived from the trace) and the request spans under it, with the
  request's ``traceparent`` in ``params._meta``, as a local run does.

No span is made by the workflow's own code: the interceptor's zero-length workflow spans are replay-safe (not
made again on a replay), and the run's are made outside the workflow. Nothing here imports OpenTelemetry unless
tracing is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio.client import Client

if TYPE_CHECKING:
    from runner.engine.telemetry.otel import Tracing

__all__ = ["interceptor", "traced_client"]


def interceptor(tracing: Tracing) -> Any:
    """Temporal's tracing interceptor, making its spans with the run's tracer (not the global one)."""
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return TracingInterceptor(tracing.tracer)


def traced_client(client: Client, tracing: Tracing) -> Client:
    """``client`` (its connection) with the tracing interceptor: for starting a run only, so that following it
    (a query every half second) makes no spans."""
    config = client.config()
    config["interceptors"] = [*config["interceptors"], interceptor(tracing)]
    return Client(**config)
