"""mcp-run: run Model Context Protocol tool calls as a batch.

The Python API (see :mod:`runner.api`)::

    import runner

    outcome = runner.run_workflow("workflows/convert_docs.yaml", resume=True)
    outcome.status, outcome.exit_code, outcome.outputs

Imported lazily, so that ``import runner`` (and ``mcp-run --version``) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Outcome", "__version__", "arun_workflow", "run_workflow"]

if TYPE_CHECKING:
    from runner.api import Outcome, arun_workflow, run_workflow


def __getattr__(name: str) -> Any:
    if name in ("Outcome", "arun_workflow", "run_workflow"):
        from runner import api

        return getattr(api, name)
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
