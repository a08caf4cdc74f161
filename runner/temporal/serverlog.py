"""What a worker does with a server's log messages and the session's warnings: it writes them to its own
stderr, masked with the run's secrets (they never enter Temporal's history). A log message is shown at or
above the run's ``server_log_level`` (``--server-log-level`` of ``run --engine temporal``, carried to the
workers in the run's definition), the level the session also asks of the server with ``logging/setLevel``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from runner.masking import Masker
from runner.protocol.mcp import LOG_LEVELS, LogMessage
from runner.termsafe import terminal

__all__ = ["log_handlers"]


def log_handlers(
    server: str, level: str | None, masker: Masker, out: TextIO | None = None
) -> tuple[Callable[[LogMessage, Any], None], Callable[[str], None]]:
    """``on_log`` and ``on_warning`` for server ``server``'s sessions; ``level`` None shows every message."""
    threshold = LOG_LEVELS.index(level) if level in LOG_LEVELS else 0

    def write(text: str) -> None:
        print(terminal(masker.mask(text)), file=out if out is not None else sys.stderr, flush=True)

    def on_log(message: LogMessage, related: Any) -> None:
        if message.severity < threshold:
            return
        logger = f" {message.logger}" if message.logger else ""
        data = masker.mask_value(message.data)
        text = data if isinstance(data, str) else json.dumps(data, default=str)
        write(f"mcp-run worker: [{server}] [{message.level}{logger}] {text}")

    def on_warning(text: str) -> None:
        write(f"mcp-run worker: warning: [{server}] {text}")

    return on_log, on_warning
