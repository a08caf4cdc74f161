"""Where a run happens: the :class:`Engine` interface that ``--engine`` and ``runner.run_workflow(engine=...)``
both select.

An engine takes a workflow file and its typed :class:`~runner.engine.run.RunOptions` and returns the run's
:class:`~runner.engine.core.outcome.Outcome`, the same type, exit codes and errors whichever engine ran it:

- ``local`` (:class:`LocalEngine`): here, in trio (:func:`runner.engine.run.execute`), journaled in the state
  directory.
- ``temporal`` (:class:`runner.temporal.engine.TemporalEngine`): on Temporal's workers, started (or found open)
  and followed from here; its own options in :class:`TemporalOptions`.

:func:`runner.api.engine_named` picks one by name. This module never imports the Temporal engine (which
implements the interface defined here): the base install has no ``temporalio`` (the ``temporal`` extra), and
the selector imports it only when it is asked for, so asking for it without the extra is a
:class:`~runner.errors.UsageError` that says what to install, never an ``ImportError``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol

from runner.errors import UsageError

if TYPE_CHECKING:
    from runner.engine.core.outcome import Outcome
    from runner.engine.core.state import RunState
    from runner.engine.options import Reporter, RunOptions, Watcher
    from runner.workflow.plan import Plan

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_TASK_QUEUE",
    "ENGINES",
    "Engine",
    "EngineName",
    "LocalEngine",
    "RunRequest",
    "TemporalOptions",
    "need_temporal",
    "refuse_unsupported",
]

EngineName = Literal["local", "temporal"]
ENGINES: Final[tuple[EngineName, ...]] = ("local", "temporal")
DEFAULT_ADDRESS: Final = "127.0.0.1:7233"
DEFAULT_TASK_QUEUE: Final = "mcp-run"
EXTRA_HINT: Final = "install the extra: pip install 'mcp-batch-run[temporal]'"


@dataclass
class RunRequest:
    """One run asked of an engine: the workflow file, its options, and who hears it as it goes (``reporter``:
    its id, warnings; ``watcher``: a view of the run, made once the plan is known). Neither prints by default."""

    path: Path
    options: RunOptions
    reporter: Reporter | None = None
    watcher: Callable[[Plan, RunState], Watcher] | None = None


class Engine(Protocol):
    """Runs a :class:`RunRequest` to its :class:`~runner.engine.core.outcome.Outcome`. ``run`` starts the event
    loop the engine needs (trio here, asyncio for Temporal's client) and stops it; ``arun`` is the same inside a
    running trio program."""

    name: EngineName

    def run(self, request: RunRequest) -> Outcome: ...

    async def arun(self, request: RunRequest) -> Outcome: ...


class LocalEngine:
    """The run here, in this process: :func:`runner.engine.run.execute`."""

    name: EngineName = "local"

    def run(self, request: RunRequest) -> Outcome:
        import trio

        return trio.run(self.arun, request)

    async def arun(self, request: RunRequest) -> Outcome:
        from runner.engine.run import execute

        return await execute(request.path, request.options, reporter=request.reporter, watcher=request.watcher)


@dataclass(frozen=True)
class TemporalOptions:
    """How a run on Temporal is started and followed (the options of ``--engine temporal``).

    ``address`` and ``task_queue``: Temporal's frontend and the queue its workers (``mcp-run worker``) serve.
    ``batch_size``: items per call activity (None: sized by each fan-out, see
    :func:`runner.temporal.spec.batch_size_for`); ``heartbeat_timeout``: a worker silent this long is taken for dead.
    ``open_attempts``: how many times a start is tried when, with ``resume``, the open run found closes before it
    is followed (a run started elsewhere, then ended)."""

    address: str = DEFAULT_ADDRESS
    task_queue: str = DEFAULT_TASK_QUEUE
    batch_size: int | None = None
    heartbeat_timeout: float = 10.0
    open_attempts: int = 3

    def check(self) -> None:
        """``UsageError`` for values a run cannot use."""
        if self.batch_size is not None and not 1 <= self.batch_size <= 1000:
            raise UsageError("--batch-size must be between 1 and 1000")
        if not self.heartbeat_timeout >= 1:
            raise UsageError("--heartbeat-timeout must be at least 1 second")
        if self.open_attempts < 1:
            raise UsageError("open_attempts must be at least 1")


NOT_ON_TEMPORAL: Final = (
    ("retry_failed", "--retry-failed"),
    ("allow_changed", "--allow-changed"),
    ("protocol", "--protocol-version"),
    ("elicitation", "--elicitation"),
)
"""The run options a run on Temporal does not take yet, and their flags (``journal=False`` is ``--no-journal``)."""


def refuse_unsupported(options: RunOptions) -> None:
    """``UsageError`` for a run option the Temporal engine does not take yet (rather than ignore it); here, not
    in :mod:`runner.temporal.engine`, so the CLI says it before asking for temporalio."""
    if not options.journal:
        raise UsageError("--no-journal is not available with --engine temporal yet")
    for name, flag in NOT_ON_TEMPORAL:
        if getattr(options, name):
            raise UsageError(f"{flag} is not available with --engine temporal yet")


def need_temporal(what: str = "--engine temporal") -> None:
    """``UsageError`` (exit 2) naming the extra when ``temporalio`` is not installed (looked for, not imported:
    only :mod:`runner.temporal` imports it)."""
    from importlib.util import find_spec

    if find_spec("temporalio") is None:
        raise UsageError(f"{what} needs temporalio; {EXTRA_HINT}")
