"""The vocabularies of a run: the words its events, its state and its screens share, each an enum in one place.

:class:`ItemStatus`, :class:`StepStatus`, :class:`RunStatus`, :class:`SkipCause`, :class:`Decision`, and
:class:`FailureKind`, which carries the exit code a failure of that kind means and whether the server may
have done the work. The journal holds their values (a StrEnum is its value in JSON);
:mod:`runner.engine.core.events` says how a value this version does not know decodes.
"""

from __future__ import annotations

import enum
from typing import Final

from runner.exitcodes import ExitCode

__all__ = ["Decision", "FailureKind", "ItemStatus", "RunStatus", "SkipCause", "StepStatus", "Verdict"]


class FailureKind(enum.StrEnum):
    """How a call (or a step) failed. ``exit_code``: what a failure of this kind makes the run exit with;
    ``in_doubt``: the server may have done the work."""

    NOT_SENT = "connection-before-send"
    OUTCOME_UNKNOWN = "outcome-unknown"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    PROTOCOL_ERROR = "protocol-error"
    TOOL_ERROR = "tool-error"
    SKIPPED_IN_DOUBT = "skipped-in-doubt"
    TEMPLATE_ERROR = "template-error"
    INVALID_CALL = "invalid-call"
    """Refused before it was sent: the server has no such tool, or the tool's inputSchema refuses the
    arguments (:class:`~runner.errors.InvalidCall`). Definite and not sent: a resume calls it again."""

    @property
    def exit_code(self) -> ExitCode:
        return _KIND_FACTS[self][0]

    @property
    def in_doubt(self) -> bool:
        return _KIND_FACTS[self][1]

    @property
    def words(self) -> str:
        """How the console says it (the journal and ``--json`` keep ``value``)."""
        return _KIND_WORDS[self]

    @classmethod
    def of(cls, value: str) -> FailureKind:
        """The kind named ``value``; ``KeyError`` for a name this version does not know."""
        return _KINDS[value]


_KIND_FACTS: Final[dict[FailureKind, tuple[ExitCode, bool]]] = {
    FailureKind.NOT_SENT: (ExitCode.UNREACHABLE, False),
    FailureKind.OUTCOME_UNKNOWN: (ExitCode.OUTCOME_UNKNOWN, True),
    FailureKind.TIMEOUT: (ExitCode.OUTCOME_UNKNOWN, True),
    FailureKind.CANCELLED: (ExitCode.OUTCOME_UNKNOWN, True),
    FailureKind.PROTOCOL_ERROR: (ExitCode.PROTOCOL, False),
    FailureKind.TOOL_ERROR: (ExitCode.FAILED, False),
    FailureKind.SKIPPED_IN_DOUBT: (ExitCode.FAILED, False),
    FailureKind.TEMPLATE_ERROR: (ExitCode.FAILED, False),
    FailureKind.INVALID_CALL: (ExitCode.FAILED, False),
}
_KIND_WORDS: Final[dict[FailureKind, str]] = {
    FailureKind.NOT_SENT: "not sent (no connection)",
    FailureKind.OUTCOME_UNKNOWN: "outcome unknown",
    FailureKind.TIMEOUT: "timed out",
    FailureKind.CANCELLED: "cancelled while running",
    FailureKind.PROTOCOL_ERROR: "error from the server",
    FailureKind.TOOL_ERROR: "tool error",
    FailureKind.SKIPPED_IN_DOUBT: "skipped (was in doubt)",
    FailureKind.TEMPLATE_ERROR: "template error",
    FailureKind.INVALID_CALL: "invalid call",
}
_KINDS: Final[dict[str, FailureKind]] = {kind.value: kind for kind in FailureKind}


class ItemStatus(enum.StrEnum):
    """Where one item (one tool call) stands."""

    PENDING = "pending"
    """Not done, and surely not run: its last attempt was never delivered, another was to follow."""
    DISPATCHED = "dispatched"
    """Sent (or about to be), no answer recorded: in flight while its run's process lives, in doubt after."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """A definite answer that is a failure (or never sent: a resume calls it again)."""
    IN_DOUBT = "in-doubt"
    """Sent, and its outcome is unknown (lost, timed out, cancelled)."""
    SKIPPED = "skipped"
    """Was in doubt; a resume decided to skip it (``--skip-in-doubt``). Counts as failed; stays skipped."""


class StepStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    """Its server could not be reached: items left undone, which a resume runs."""
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    NOT_RUN = "not-run"


class SkipCause(enum.StrEnum):
    """Why a step was skipped (``step_skipped.cause``); :mod:`runner.engine.core.conditions` decides."""

    CONDITION = "if-false"
    """Its ``if:`` was false. Nothing failed because of it."""
    DEPENDENCY_SKIPPED = "dependency-skipped"
    """A dependency was skipped (by its own ``if:``, or in turn), and its ``if:`` calls no status function."""
    FAILURE = "failure"
    """Something failed: a dependency (or, in turn, one of its own), or another step (no new step starts)."""
    UNFINISHED = "unfinished"
    """A dependency has no definite outcome yet (in doubt, incomplete, interrupted), or the run is being
    interrupted: nothing is decided, a resume decides."""


class RunStatus(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    IN_DOUBT = "in-doubt"
    INCOMPLETE = "incomplete"
    INTERRUPTED = "interrupted"

    @property
    def closed(self) -> bool:
        """A closed run has a definite answer for every item (see :mod:`runner.engine.core.state`)."""
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED)


class Decision(enum.StrEnum):
    """What a person decided about items in doubt (``--rerun-in-doubt``, ``--skip-in-doubt``,
    ``--accept-in-doubt``): each settles the items its :class:`DoubtDecided` record names, and only those."""

    RERUN = "rerun"
    """Call them again: once. A crash during that call leaves them in doubt again, and a new decision is asked."""
    SKIP = "skip"
    """They may have run; never call them again: they count as failed (``skipped-in-doubt``)."""
    ACCEPT = "accept"
    """They ran: they count as succeeded, with no result, and the steps that depend on them run."""


class Verdict(enum.StrEnum):
    """What a step's ``reconcile:`` tool said about an item in doubt (its :class:`ItemReconciled` record, fsynced
    before it acts)."""

    DONE = "done"
    """The call happened: the item succeeded (the reconcile tool's result is its result), marked reconciled."""
    NOT_DONE = "not-done"
    """The call surely did not happen: it is made (again)."""
    ERROR = "error"
    """The reconcile tool failed, or ``done`` was not a boolean: the item stays in doubt."""
