"""The Temporal SDK's runtime for mcp-run's clients and workers, and what the SDK prints.

The SDK core's own log lines (gRPC retries while the server is away, for example) go to stderr, never to
stdout, where ``--json`` writes the run's summary (by default the core prints them on stdout). The SDK's Python
loggers (``temporalio.*``: "Completing activity as failed", a poller that failed while the server restarted)
would print through Python's last-resort handler, a bare message and a whole traceback; here they write one
line each, ``mcp-run: temporal: MESSAGE: ErrorType: what it said``, the traceback left out (:class:`SdkLines`)."""

from __future__ import annotations

import logging
import sys

from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

from runner.termsafe import terminal

__all__ = ["CORE_LOGGER", "SDK_LOGGER", "SdkLines", "runtime"]

CORE_LOGGER = "mcp_run.temporal.core"
SDK_LOGGER = "temporalio"  # the parent of the SDK's Python loggers
PREFIX = "mcp-run: temporal: "

_runtime: Runtime | None = None


class SdkLines(logging.Formatter):
    """One line per record: the prefix, the message, and the exception's type and first line (of the first
    exception of a group), never its traceback."""

    def __init__(self) -> None:
        super().__init__(PREFIX + "%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = PREFIX + record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        if error is not None:
            said = str(error).strip().splitlines()
            text += f": {type(error).__name__}" + (f": {said[0]}" if said else "")
        return terminal(" ".join(text.split("\n")))


def _lines_to_stderr(name: str) -> None:
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(SdkLines())
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def runtime() -> Runtime:
    """The one runtime of this process (made on first use)."""
    global _runtime
    if _runtime is None:
        _lines_to_stderr(CORE_LOGGER)
        _lines_to_stderr(SDK_LOGGER)
        filter_ = TelemetryFilter(core_level="WARN", other_level="ERROR")
        logger = logging.getLogger(CORE_LOGGER)
        logging_config = LoggingConfig(filter=filter_, forwarding=LogForwardingConfig(logger=logger))
        _runtime = Runtime(telemetry=TelemetryConfig(logging=logging_config))
    return _runtime
