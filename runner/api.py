"""The Python API: run a workflow from a program, as ``mcp-run FILE`` does from a shell.

::

    import runner

    outcome = runner.run_workflow("workflows/convert_docs.yaml", inputs={"out": "build/html"}, resume=True)
    print(outcome.status, outcome.exit_code, outcome.outputs)

    # on Temporal's workers (the temporal extra; `mcp-run worker --engine temporal` serves the queue)
    outcome = runner.run_workflow(path, engine="temporal", temporal=runner.TemporalOptions(task_queue="q"))

``run_workflow`` starts the event loop itself; inside a trio program, ``await runner.arun_workflow(...)``. Both
take the options of :class:`~runner.engine.run.RunOptions` as keywords, an ``engine`` (``local``, the default,
or ``temporal``: :mod:`runner.engines`) and its ``temporal`` options, raise the typed errors exported from
:mod:`runner` (a refusal never prints; ``engine="temporal"`` without the extra is a ``UsageError`` that names
it), and return an :class:`~runner.engine.core.outcome.Outcome`: ``status`` (``succeeded``, ``failed``,
``in-doubt``, ``incomplete``, ``interrupted``), ``exit_code`` (the CLI's), ``outputs``, ``output_failures``
(those that failed to render), ``failures``, ``in_doubt``, ``run_id``, and ``summary()`` (the ``--json``
summary). A state directory that cannot keep runs is refused before anything is called
(:class:`~runner.engine.preflight.StateDirUnusable`, a ``UsageError``). Unlike the CLI, nothing is printed
and signals are left alone unless ``watch_signals=True``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.engine.core.outcome import Outcome
from runner.engine.options import Reporter, RunOptions
from runner.engines import ENGINES, Engine, EngineName, LocalEngine, RunRequest, TemporalOptions, need_temporal
from runner.errors import UsageError

__all__ = ["Outcome", "arun_workflow", "engine_named", "run_workflow"]


def engine_named(name: str, *, temporal: TemporalOptions | None = None) -> Engine:
    """The engine called ``name`` (``local`` or ``temporal``); ``temporal`` configures the Temporal engine (its
    defaults when None; refused for the local engine, which it would not configure). Here, not in
    :mod:`runner.engines`: the Temporal engine imports that interface, and the selector imports the engine."""
    if name == "local":
        if temporal is not None:
            raise UsageError("temporal options configure engine='temporal', not the local engine")
        return LocalEngine()
    if name == "temporal":
        need_temporal("engine='temporal'")
        options = temporal if temporal is not None else TemporalOptions()
        options.check()
        from runner.temporal.engine import TemporalEngine  # only now: the base install has no temporalio

        return TemporalEngine(options)
    raise UsageError(f"engine must be one of {', '.join(map(repr, ENGINES))}, not {name!r}")


def _prepare(
    path: str | Path,
    *,
    engine: EngineName | str,
    temporal: TemporalOptions | None,
    inputs: dict[str, Any] | None,
    state_dir: str | Path | None,
    resume: bool,
    reporter: Reporter | None,
    options: dict[str, Any],
) -> tuple[Engine, RunRequest]:
    """The engine asked for and the run asked of it, the options checked before anything starts."""
    run_options = RunOptions(inputs=inputs, state_dir=state_dir, resume=resume, **options)
    return engine_named(engine, temporal=temporal), RunRequest(Path(path), run_options, reporter=reporter)


async def arun_workflow(
    path: str | Path,
    *,
    engine: EngineName | str = "local",
    temporal: TemporalOptions | None = None,
    inputs: dict[str, Any] | None = None,
    state_dir: str | Path | None = None,
    resume: bool = False,
    reporter: Reporter | None = None,
    **options: Any,
) -> Outcome:
    """Run the workflow at ``path`` inside a running trio program; see the module docstring."""
    chosen, request = _prepare(
        path, engine=engine, temporal=temporal, inputs=inputs, state_dir=state_dir, resume=resume,
        reporter=reporter, options=options,
    )  # fmt: skip
    return await chosen.arun(request)


def run_workflow(
    path: str | Path,
    *,
    engine: EngineName | str = "local",
    temporal: TemporalOptions | None = None,
    inputs: dict[str, Any] | None = None,
    state_dir: str | Path | None = None,
    resume: bool = False,
    reporter: Reporter | None = None,
    **options: Any,
) -> Outcome:
    """Run the workflow at ``path`` (the engine's event loop is started and stopped here); see the module
    docstring."""
    chosen, request = _prepare(
        path, engine=engine, temporal=temporal, inputs=inputs, state_dir=state_dir, resume=resume,
        reporter=reporter, options=options,
    )  # fmt: skip
    return chosen.run(request)
