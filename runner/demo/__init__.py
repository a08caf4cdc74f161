"""The demo MCP server of ``workflows/``: a real Markdown -> HTML batch converter on the official SDK.

Needs the ``demo`` extra (``mcp``, ``markdown-it-py``, ``uvicorn``); this package's own
``__init__`` imports nothing from it, so ``runner`` stays importable without the extra.
Run it as ``mcp-run-demo`` (the console script installed with mcp-run, :func:`main`) or
``python -m runner.demo``; see :mod:`runner.demo.server`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["DEMO_MODULES", "main"]

DEMO_MODULES = frozenset({"mcp", "mcp_types", "markdown_it", "uvicorn", "starlette", "anyio"})
"""The top-level modules the ``demo`` extra brings (directly or through ``mcp``)."""


def main(argv: Sequence[str] | None = None) -> int:
    """``mcp-run-demo``: run the demo server; without the ``demo`` extra, say how to install it (exit 1)."""
    try:
        from runner.demo.server import main as serve
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in DEMO_MODULES:
            raise
        sys.stderr.write(
            f"mcp-run-demo: the demo server needs the demo extra (module {missing!r} is missing); install it "
            "with: pip install 'mcp-batch-run[demo]' (from a checkout: pip install -e '.[demo]')\n"
        )
        return 1
    return serve(argv)
