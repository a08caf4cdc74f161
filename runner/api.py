"""The Python API: run a workflow from a program, as ``mcp-run FILE`` does from a shell.

::

    import runner

    outcome = runner.run_workflow("workflows/convert_docs.yaml", inputs={"out": "build/html"}, resume=True)
    print(outcome.status, outcome.exit_code, outcome.outputs)

``run_workflow`` runs trio itself; inside a trio program, ``await runner.arun_workflow(...)``. Both take the
options of :class:`~runner.engine.run.RunOptions` as keywords, raise the typed errors of
:mod:`runner.errors` and :mod:`runner.engine.core.resume` (a refusal never prints), and return an
:class:`~runner.engine.core.outcome.Outcome`: ``status`` (``succeeded``, ``failed``, ``in-doubt``,
``incomplete``, ``interrupted``), ``exit_code`` (the CLI's), ``outputs``, ``output_failures`` (those that
failed to render), ``failures``, ``in_doubt``, ``run_id``, and ``summary()`` (the ``--json`` summary). A state
directory that cannot keep runs is refused before anything is called
(:class:`~runner.engine.preflight.StateDirUnusable`, a ``UsageError``). Unlike the CLI, nothing is printed
and signals are left alone unless ``watch_signals=True``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import trio

from runner.engine.core.outcome import Outcome
from runner.engine.run import Reporter, RunOptions, execute

__all__ = ["Outcome", "arun_workflow", "run_workflow"]


async def arun_workflow(
    path: str | Path,
    *,
    inputs: dict[str, Any] | None = None,
    state_dir: str | Path | None = None,
    resume: bool = False,
    reporter: Reporter | None = None,
    **options: Any,
) -> Outcome:
    """Run the workflow at ``path`` inside a running trio program; see the module docstring."""
    run_options = RunOptions(inputs=inputs, state_dir=state_dir, resume=resume, **options)
    return await execute(Path(path), run_options, reporter=reporter)


def run_workflow(
    path: str | Path,
    *,
    inputs: dict[str, Any] | None = None,
    state_dir: str | Path | None = None,
    resume: bool = False,
    reporter: Reporter | None = None,
    **options: Any,
) -> Outcome:
    """Run the workflow at ``path`` (trio is started and stopped here); see the module docstring."""
    call = partial(arun_workflow, path, inputs=inputs, state_dir=state_dir, resume=resume, reporter=reporter)
    return trio.run(partial(call, **options))
