"""The Temporal SDK's runtime for mcp-run's clients and workers: the SDK core's own log lines (gRPC retries
while the server is away, for example) go to stderr, never to stdout, where ``--json`` writes the run's
summary. By default the core prints them on stdout."""

from __future__ import annotations

import logging
import sys

from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

__all__ = ["CORE_LOGGER", "runtime"]

CORE_LOGGER = "mcp_run.temporal.core"

_runtime: Runtime | None = None


def runtime() -> Runtime:
    """The one runtime of this process (made on first use)."""
    global _runtime
    if _runtime is None:
        logger = logging.getLogger(CORE_LOGGER)
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("mcp-run: temporal: %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.WARNING)
            logger.propagate = False
        filter_ = TelemetryFilter(core_level="WARN", other_level="ERROR")
        logging_config = LoggingConfig(filter=filter_, forwarding=LogForwardingConfig(logger=logger))
        _runtime = Runtime(telemetry=TelemetryConfig(logging=logging_config))
    return _runtime
