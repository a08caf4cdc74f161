"""mcp-run: run Model Context Protocol tool calls as a batch.

The Python API (see :mod:`runner.api`)::

    import runner

    outcome = runner.run_workflow("workflows/convert_docs.yaml", resume=True)
    outcome.status, outcome.exit_code, outcome.outputs

    try:
        runner.run_workflow("workflows/convert_docs.yaml")
    except runner.UnfinishedRun as refusal:  # every error a caller may meet is here (runner.errors draws them)
        ...

Imported lazily (a module ``__getattr__``), so that ``import runner`` (and ``mcp-run --version``) stays light:
each name is looked up in the module that defines it the first time it is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

__version__ = "0.1.0"

if TYPE_CHECKING:
    from runner.api import Outcome, arun_workflow, engine_named, run_workflow
    from runner.auth.errors import AuthFailed, LoginRequired
    from runner.engine.calls.servers import ServerUnreachable
    from runner.engine.calls.single import TaskNotCollected
    from runner.engine.calls.task import TaskLost, TaskUnfinished
    from runner.engine.core.resume import (
        EnvironmentChanged,
        NoRunToRetry,
        NothingToRetry,
        NoUnfinishedRun,
        RunAlreadyFinished,
        RunChanged,
        RunDamaged,
        UnfinishedRun,
    )
    from runner.engine.journal.reader import JournalCorrupt
    from runner.engine.journal.rundir import AmbiguousRun, UnknownRun, WorkflowBusy
    from runner.engine.preflight import OutputUnusable, StateDirUnusable
    from runner.engines import Engine, LocalEngine, RunRequest, TemporalOptions
    from runner.errors import (
        BusyError,
        CallTimeout,
        ConnectFailed,
        FrameTooLarge,
        HTTPStatusError,
        InvalidCall,
        JournalWriteError,
        JsonRpcError,
        MalformedMessage,
        McpRunError,
        NotDelivered,
        OpenRunChanged,
        OutcomeUnknown,
        ProtocolError,
        RunAlreadyOpen,
        RunEndedWithoutResult,
        ServerError,
        SessionExpired,
        TemporalUnreachable,
        Throttled,
        TransportError,
        UnsupportedProtocolVersion,
        UsageError,
        WorkflowError,
    )
    from runner.launch import LaunchError
    from runner.protocol.mcp import ToolError
    from runner.session.results import ResultNotSupported, TaskNotFollowed
    from runner.workflow.expressions import TemplateSyntaxError
    from runner.workflow.positions import WorkflowErrors
    from runner.workflow.template import TemplateError

_FROM: Final[dict[str, tuple[str, ...]]] = {
    "runner.api": ("Outcome", "arun_workflow", "engine_named", "run_workflow"),
    "runner.engines": ("Engine", "LocalEngine", "RunRequest", "TemporalOptions"),
    "runner.errors": (
        "BusyError", "CallTimeout", "ConnectFailed", "FrameTooLarge", "HTTPStatusError", "InvalidCall",
        "JournalWriteError", "JsonRpcError", "MalformedMessage", "McpRunError", "NotDelivered", "OpenRunChanged",
        "OutcomeUnknown", "ProtocolError", "RunAlreadyOpen", "RunEndedWithoutResult", "ServerError",
        "SessionExpired", "TemporalUnreachable", "Throttled", "TransportError", "UnsupportedProtocolVersion",
        "UsageError", "WorkflowError",
    ),
    "runner.auth.errors": ("AuthFailed", "LoginRequired"),
    "runner.protocol.mcp": ("ToolError",),
    "runner.engine.calls.single": ("TaskNotCollected",),
    "runner.engine.calls.task": ("TaskLost", "TaskUnfinished"),
    "runner.engine.core.resume": (
        "EnvironmentChanged", "NoRunToRetry", "NoUnfinishedRun", "NothingToRetry", "RunAlreadyFinished",
        "RunChanged", "RunDamaged", "UnfinishedRun",
    ),
    "runner.engine.journal.reader": ("JournalCorrupt",),
    "runner.engine.journal.rundir": ("AmbiguousRun", "UnknownRun", "WorkflowBusy"),
    "runner.engine.preflight": ("OutputUnusable", "StateDirUnusable"),
    "runner.engine.calls.servers": ("ServerUnreachable",),
    "runner.launch": ("LaunchError",),
    "runner.session.results": ("ResultNotSupported", "TaskNotFollowed"),
    "runner.workflow.positions": ("WorkflowErrors",),
    "runner.workflow.expressions": ("TemplateSyntaxError",),
    "runner.workflow.template": ("TemplateError",),
}  # fmt: skip
"""Where each public name is defined (the errors of the tree in :mod:`runner.errors`, wherever they live)."""

_MODULE_OF: Final = {name: module for module, names in _FROM.items() for name in names}

__all__ = [
    "AmbiguousRun",
    "AuthFailed",
    "BusyError",
    "CallTimeout",
    "ConnectFailed",
    "Engine",
    "EnvironmentChanged",
    "FrameTooLarge",
    "HTTPStatusError",
    "InvalidCall",
    "JournalCorrupt",
    "JournalWriteError",
    "JsonRpcError",
    "LaunchError",
    "LocalEngine",
    "LoginRequired",
    "MalformedMessage",
    "McpRunError",
    "NoRunToRetry",
    "NoUnfinishedRun",
    "NotDelivered",
    "NothingToRetry",
    "OpenRunChanged",
    "Outcome",
    "OutcomeUnknown",
    "OutputUnusable",
    "ProtocolError",
    "ResultNotSupported",
    "RunAlreadyFinished",
    "RunAlreadyOpen",
    "RunChanged",
    "RunDamaged",
    "RunEndedWithoutResult",
    "RunRequest",
    "ServerError",
    "ServerUnreachable",
    "SessionExpired",
    "StateDirUnusable",
    "TaskLost",
    "TaskNotCollected",
    "TaskNotFollowed",
    "TaskUnfinished",
    "TemplateError",
    "TemplateSyntaxError",
    "TemporalOptions",
    "TemporalUnreachable",
    "Throttled",
    "ToolError",
    "TransportError",
    "UnfinishedRun",
    "UnknownRun",
    "UnsupportedProtocolVersion",
    "UsageError",
    "WorkflowBusy",
    "WorkflowError",
    "WorkflowErrors",
    "__version__",
    "arun_workflow",
    "engine_named",
    "run_workflow",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
