"""``mcp-run FILE --engine temporal`` loads what describes and follows a run, not the local engine: trio, the
scheduler, the sessions and the journal's writer are the worker's. Loading them cost the CLI 0.13 s of imports
(0.505 -> 0.377 s); a 1,000-item run on the dev server went from about 1.1 to 0.85 s wall (measured)."""

from __future__ import annotations

import json
import subprocess
import sys

# What run_temporal imports, at module level and inside the functions a run goes through.
CLI_PATH = [
    "runner.cli",
    "runner.cli.run",
    "runner.cli.temporal",
    "runner.cli.report",
    "runner.api",
    "runner.engines",
    "runner.temporal.engine",
    "runner.temporal.client",
]
LOCAL_ENGINE = ["trio", "runner.engine.run", "runner.engine.scheduler", "runner.session.session",
                "runner.engine.journal.writer", "runner.transports.stdio"]  # fmt: skip


def test_the_temporal_cli_loads_no_local_engine() -> None:
    code = (
        f"import importlib, json, sys\nfor name in {CLI_PATH!r}:\n    importlib.import_module(name)\n"
        f"print(json.dumps([m for m in {LOCAL_ENGINE!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_the_local_cli_still_has_its_options_where_they_were() -> None:
    """``runner.engine.run`` names the options it runs with, as before they had a module of their own."""
    from runner.engine import options, run

    assert run.RunOptions is options.RunOptions
    assert "RunOptions" in run.__all__
