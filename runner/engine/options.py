"""How a run is asked for: its options (:class:`RunOptions`), who hears what it says as it goes
(:class:`Reporter`) and who draws it (:class:`Watcher`). Apart from :mod:`runner.engine.run` so that what only
describes a run (the CLI's arguments, the Temporal engine) does not load the local engine (trio, the scheduler,
the sessions): 0.13 s of imports at the start-up of every ``mcp-run FILE --engine temporal`` (measured)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from runner.errors import UsageError
from runner.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE

if TYPE_CHECKING:
    from runner.engine.core.events import Entry
    from runner.engine.core.resume import InDoubt

__all__ = ["Reporter", "RunOptions", "Watcher"]


@dataclass(frozen=True)
class RunOptions:
    """How to run a workflow; built once (by the CLI from its arguments, or by :func:`runner.run_workflow`).

    ``inputs`` are values by name (typed as the workflow declares); ``input_pairs`` are ``NAME=VALUE`` texts
    and ``inputs_file`` a YAML or JSON file of them, as on the command line. ``resume``: continue the newest
    open run, else start one; ``run_id``: continue that run; ``start_new=False`` (``resume WORKFLOW``): never
    start one. ``in_doubt``: what to do with items an earlier attempt left in doubt (``ask`` stops before
    anything runs). ``journal=False``: a throwaway run, neither journaled nor locked. ``no_cache``: steps with
    ``cache:`` make every call (``--no-cache``); ``clock``: the time earlier results' ages are measured from.
    """

    inputs: Mapping[str, Any] | None = None
    input_pairs: tuple[str, ...] = ()
    inputs_file: str | None = None
    state_dir: str | Path | None = None
    resume: bool = False
    new_run: bool = False
    retry_failed: bool = False
    run_id: str | None = None
    start_new: bool = True
    in_doubt: InDoubt = "ask"
    allow_changed: bool = False
    journal: bool = True
    concurrency: int = 16
    retry_attempts: int = 5
    retry_max_time: float = 120.0
    connect_timeout: float | None = None
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    server_log_level: str | None = "info"
    elicitation: str | None = None
    protocol: str | None = None  # --protocol-version: pins every server (None: each server's protocol:)
    grace: float = 10.0
    watch_signals: bool = False
    no_cache: bool = False  # --no-cache: steps with `cache:` reuse nothing this run (their results are still keyed)
    clock: Callable[[], float] = time.time  # the wall clock a cache's durations are measured by (tests choose it)

    def check(self) -> None:
        """``UsageError`` for options that contradict each other or make no sense."""
        self._check_choice()
        if self.in_doubt not in ("ask", "rerun", "skip", "accept"):
            raise UsageError(f"in_doubt must be 'ask', 'rerun', 'skip' or 'accept', not {self.in_doubt!r}")
        if self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.connect_timeout is not None and not self.connect_timeout > 0:
            raise UsageError("--connect-timeout must be a positive number of seconds")
        if self.max_message_size < 1:
            raise UsageError("--max-message-size must be a positive number of bytes")

    def _check_choice(self) -> None:
        """The options that choose the run (new, resumed, none) must not contradict each other."""
        if self.resume and self.new_run:
            raise UsageError("--resume and --new-run contradict each other")
        if self.retry_failed and self.new_run:
            raise UsageError("--retry-failed and --new-run contradict each other: --retry-failed resumes a run")
        if not self.journal and (self.resume or self.retry_failed or self.run_id is not None):
            raise UsageError("--no-journal cannot resume: there is no journal")


class Reporter(Protocol):
    """What a run says as it goes: ``info`` (its id, "resuming"), ``warn`` (a server's odd output, a
    session renewed), ``error`` (an interrupt). Masking secrets in the text is the reporter's job."""

    def info(self, text: str) -> None: ...

    def warn(self, text: str) -> None: ...

    def error(self, text: str) -> None: ...


class Watcher(Protocol):
    """A view of the run: sees every entry after the run's state applied it, draws in ``run``."""

    def observe(self, entry: Entry) -> None: ...

    async def run(self) -> None: ...

    def close(self) -> None: ...
