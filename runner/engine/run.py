"""A run, from a workflow file to its outcome: the lifecycle, in the library (the CLI only drives it).

::

    outcome = await execute(Path("workflows/convert_docs.yaml"), RunOptions(resume=True))

1. **Choose**, under the workflow lock (:class:`~runner.engine.journal.rundir.WorkflowLock`, held to the end): a new
   run, or one to continue (:func:`runner.engine.core.resume.choose_run`).
2. **Prepare**: the plan, with a resumed run's recorded inputs (secret ones must be given again); the
   secrets to mask; step fingerprints; for a resume, the journal folded into the run's state and the
   decisions about what earlier attempts left (:func:`runner.engine.core.resume.resume_plan`).
3. **Run**, holding the run's lock and its journal open: an :class:`~runner.engine.journal.writer.EventLog` that
   applies every event to the run's :class:`~runner.engine.core.state.RunState` (and to the watcher, a view),
   the :class:`~runner.engine.scheduler.Scheduler`, and (``watch_signals``) the interrupt rules: the first
   SIGINT/SIGTERM drains, the second (or the end of ``grace``) cancels, a third exits at once.
4. **End**: ``run_finished`` when every item has a definite answer, else ``run_stopped`` or
   ``run_interrupted`` (the run stays open); the :class:`~runner.engine.core.outcome.Outcome` is returned.

Refusals are typed errors (:mod:`runner.engine.core.resume`, ``WorkflowBusy``, ``JournalWriteError``); nothing
here prints. What a run says as it goes (its id, warnings, the interrupt) goes to a :class:`Reporter`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from runner._trio import single_error
from runner.engine.calls.retry import RetryPolicy
from runner.engine.core import events
from runner.engine.core.cache import CacheIndex
from runner.engine.core.events import JOURNAL_FORMAT, RunResumed, RunStarted
from runner.engine.core.outcome import Outcome
from runner.engine.core.resume import Prior, RunDamaged, RunInfo, choose_run, resume_plan
from runner.engine.core.state import RunState
from runner.engine.core.vocabulary import RunStatus
from runner.engine.interrupts import signal_exit_code, watch_signals
from runner.engine.journal.cacheindex import cache_index
from runner.engine.journal.reader import JournalCorrupt, decode_first, entry_or_none, first_line
from runner.engine.journal.rundir import (
    RunDir,
    WorkflowIdentity,
    WorkflowLock,
    find_run,
    is_locked,
    resolve_state_dir,
    runs_of,
)
from runner.engine.journal.writer import EventLog, JournalWriteError, Masker
from runner.engine.options import Reporter, RunOptions, Watcher
from runner.engine.preflight import StateDirUnusable, check_state_dir, state_dir_named_by
from runner.engine.runctl import env_context, make_opener
from runner.engine.scheduler import Scheduler, SchedulerOptions, SessionOpener
from runner.engine.telemetry import from_env as tracing_from_env
from runner.errors import UsageError
from runner.exitcodes import combine
from runner.launch import passed_through
from runner.masking import placeholder
from runner.quoting import masking
from runner.secrets_of import collect_secrets, oauth_secret_sink
from runner.workflow.fingerprints import fingerprints, workflow_hash
from runner.workflow.loader import LoadedWorkflow, load_inputs_file, load_workflow, validate
from runner.workflow.plan import DEFAULT_CONNECT_TIMEOUT, Plan
from runner.workflow.servers import check_headers

if TYPE_CHECKING:
    from runner.engine.telemetry.otel import Tracing

__all__ = ["Reporter", "RunOptions", "Watcher", "execute"]

WORKFLOW_LOCK_WAIT: Final = 30.0  # how long to wait for another invocation still deciding whether to run
RUN_LOCK_WAIT: Final = 0.5  # `runs`/`show` take a run's lock for an instant to see whether it is live


class _Quiet:
    def info(self, text: str) -> None:
        return None

    def warn(self, text: str) -> None:
        return None

    def error(self, text: str) -> None:
        return None


class _Masked:
    """The reporter, given text with the run's secrets masked."""

    def __init__(self, reporter: Reporter, masker: Masker) -> None:
        self._reporter = reporter
        self._masker = masker

    def info(self, text: str) -> None:
        self._reporter.info(self._masker.mask(text))

    def warn(self, text: str) -> None:
        self._reporter.warn(self._masker.mask(text))

    def error(self, text: str) -> None:
        self._reporter.error(self._masker.mask(text))


@dataclass
class _Prepared:
    """Everything chosen before the run starts."""

    path: Path
    plan: Plan
    inputs: dict[str, Any]
    env: dict[str, Any]
    masker: Masker
    fingerprints: dict[str, str]
    workflow_hash: str
    state: RunState
    run_dir: RunDir | None = None
    prior: Prior | None = None
    signals: list[int] = field(default_factory=list)
    identity: WorkflowIdentity | None = None
    cache: CacheIndex | None = None
    tracing: Tracing | None = None
    traceparent: str | None = None  # the attempt's run span, journaled in its first record


async def execute(
    path: Path,
    options: RunOptions,
    *,
    reporter: Reporter | None = None,
    watcher: Callable[[Plan, RunState], Watcher] | None = None,
    opener: Callable[[Plan, Mapping[str, Any], Mapping[str, Any]], SessionOpener] | None = None,
    tracing: Tracing | None = None,
) -> Outcome:
    """Run the workflow at ``path`` (see the module docstring). ``watcher`` makes the view once the plan
    and the run's state exist; ``opener`` replaces how sessions are opened (tests); ``tracing``: the run's
    OpenTelemetry spans (:mod:`runner.engine.telemetry`; default: as the ``OTEL_*`` variables say, none
    when they are unset)."""
    options.check()
    say = reporter or _Quiet()
    # Choosing reads files and may wait for the workflow lock: in a thread, not on trio's loop.
    try:
        held, prepared = await trio.to_thread.run_sync(_choose, path, options)
    except OSError as exc:  # the state directory's: the workflow and inputs files raise errors of their own
        state_dir = resolve_state_dir(str(options.state_dir) if options.state_dir else None, path)
        named_by = state_dir_named_by(str(options.state_dir) if options.state_dir else None)
        raise StateDirUnusable.from_os_error(state_dir, exc, named_by=named_by) from None
    say = _Masked(say, prepared.masker)
    with held:
        prepared.tracing = tracing if tracing is not None else tracing_from_env(os.environ, warn=say.warn)
        if prepared.run_dir is not None:
            verb = "run" if prepared.prior is None else "resuming run"
            say.info(f"{verb} {prepared.run_dir.run_id} (journal: {prepared.run_dir.journal})")
        try:
            with masking(prepared.masker.mask):  # values quoted into errors are masked before they are cut
                return await _run(prepared, options, say, watcher, opener)
        except Exception as exc:
            prepared.masker.scrub(exc)  # what the caller prints of it: secrets masked, in place
            if prepared.tracing is not None:
                prepared.tracing.end(exc)
            raise
        finally:
            if prepared.tracing is not None:
                prepared.tracing.end()
                with trio.CancelScope(shield=True):  # an interrupted run's spans are sent too
                    await trio.to_thread.run_sync(prepared.tracing.shutdown)  # what is buffered, bounded by
                    # the exporter's own timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s)


def _choose(path: Path, options: RunOptions) -> tuple[ExitStack, _Prepared]:
    """Steps 1 and 2 of the module docstring. Returns the locks held (the workflow's and the run's, to be
    released when the run ends) and what was prepared."""
    # Read before any lock is taken (a file that cannot be read fails here, while nothing is held).
    from_file = load_inputs_file(options.inputs_file) if options.inputs_file else None
    if not path.is_file():  # the loader's error, before any state directory is made beside a typo
        _load_plan(path, options, require_inputs=False, from_file=from_file)
        raise UsageError(f"no workflow file {str(path)!r}")
    held = ExitStack()
    loaded = load_workflow(path)  # its name: is part of its identity; parsed once, for the plan too
    if not options.journal:
        return held, _prepare(path, options, run_dir=None, loaded=loaded, from_file=from_file)
    flag = str(options.state_dir) if options.state_dir else None
    state_dir = resolve_state_dir(flag, path)
    check_state_dir(state_dir, named_by=state_dir_named_by(flag))
    identity = WorkflowIdentity.of(path, loaded.workflow.name)
    try:
        # The workflow lock comes first and stays until the run ends: choosing a run (or none) and running
        # it are one decision that no other process can interleave with.
        lock = held.enter_context(WorkflowLock(state_dir, identity).acquire(wait=WORKFLOW_LOCK_WAIT))
        choice = choose_run(
            _run_infos(state_dir, identity),
            run_id=options.run_id,
            resume=options.resume,
            new_run=options.new_run,
            retry_failed=options.retry_failed,
            start_new=options.start_new,
        )
        run_dir = find_run(state_dir, choice.run_id) if choice.run_id is not None else None
        prepared = _prepare(path, options, run_dir=run_dir, loaded=loaded, from_file=from_file)
        prepared.identity = identity
        if run_dir is None:
            try:
                run_dir = prepared.run_dir = RunDir.create(state_dir)
            except OSError as exc:
                raise UsageError(
                    f"cannot keep runs in {state_dir}: {exc.strerror or exc}; choose --state-dir"
                ) from None
        lock.set_running(run_dir.run_id)
        held.enter_context(_locked(run_dir))
        prepared.cache = _cache_of(prepared, options, state_dir, identity, run_dir)
    except BaseException:
        held.close()
        raise
    return held, prepared


def _cache_of(
    prepared: _Prepared, options: RunOptions, state_dir: Path, identity: WorkflowIdentity, run_dir: RunDir
) -> CacheIndex | None:
    """The results earlier runs of the workflow left for its steps with ``cache:`` (read once, here, under the
    workflow lock: no run of it writes meanwhile); None when no step has one, or with ``--no-cache``."""
    horizon = max((ps.cache for ps in prepared.plan.steps.values() if ps.cache is not None), default=None)
    if horizon is None or options.no_cache:
        return None
    earlier = [other for other in runs_of(state_dir, identity) if other.run_id != run_dir.run_id]
    return cache_index(earlier, now=options.clock(), horizon=horizon, unmask=prepared.masker)


def _run_infos(state_dir: Path, identity: WorkflowIdentity) -> list[RunInfo]:
    """The workflow's runs, as choosing needs them; with those whose first record cannot be read (they may
    be its runs: see :func:`runner.engine.journal.rundir.runs_of`)."""
    infos = []
    for run_dir in runs_of(state_dir, identity):
        first, damage = run_dir.head()  # (read once: its damage, and the workflow it names)
        closed = run_dir.closed_status() if damage is None else None
        started_from = first.event.workflow if first is not None and isinstance(first.event, RunStarted) else None
        infos.append(
            RunInfo(
                run_dir.run_id,
                RunStatus(closed) if closed else None,
                is_locked(run_dir.path),
                damaged=str(damage) if damage is not None else None,
                elsewhere=started_from if started_from not in (None, identity.path) else None,
            )
        )
    return infos


@contextmanager
def _locked(run_dir: RunDir) -> Iterator[None]:
    lock = run_dir.lock(wait=RUN_LOCK_WAIT)
    try:
        yield
    finally:
        lock.release()


def _load_plan(
    path: Path | LoadedWorkflow,
    options: RunOptions,
    *,
    require_inputs: bool,
    from_file: Mapping[str, Any] | None,
    base: Mapping[str, Any] | None = None,
) -> Plan:
    merged = {**(base or {}), **(from_file or {}), **(options.inputs or {})}
    source = path if isinstance(path, LoadedWorkflow) else str(path)
    return validate(
        source, require_inputs=require_inputs, input_pairs=list(options.input_pairs), inputs_file=merged or None
    )


def _recorded_inputs(run_dir: RunDir) -> dict[str, Any]:
    """A resumed run's inputs from its journal; secret inputs were never written, so they must be given again."""
    recorded = _recorded_start(run_dir)
    if recorded.secret_inputs is not None:
        hidden = set(recorded.secret_inputs)
    else:  # before journal format 3: a secret input was written as its placeholder
        hidden = {name for name, value in recorded.inputs.items() if value == placeholder(f"inputs.{name}")}
    return {name: value for name, value in recorded.inputs.items() if name not in hidden}


def _recorded_start(run_dir: RunDir) -> RunStarted:
    """The run's ``run_started``, its line read once and decoded twice: as shown, for the names of the
    environment variables it read, then with their values, so that their placeholders read back from the
    environment (by the masker's decoding: a text that only looks like one stays text)."""
    line, line_no = first_line(run_dir.journal)
    source = str(run_dir.journal)
    unknown = UsageError(f"run {run_dir.run_id} has no run_started record; it cannot be resumed")
    shown = entry_or_none(line)
    if shown is None or not isinstance(shown.event, RunStarted):
        raise unknown
    env = Masker({f"env.{name}": os.environ[name] for name in shown.event.env if name in os.environ})
    decoded = decode_first(line, source=source, line_no=line_no, unmask=env)
    if decoded is None or not isinstance(decoded.event, RunStarted):
        raise unknown
    return decoded.event


def _prepare(
    path: Path,
    options: RunOptions,
    *,
    run_dir: RunDir | None,
    loaded: LoadedWorkflow,
    from_file: Mapping[str, Any] | None,
) -> _Prepared:
    base = _recorded_inputs(run_dir) if run_dir is not None else None
    plan = _load_plan(loaded, options, require_inputs=True, from_file=from_file, base=base)
    inputs = dict(plan.input_values or {})
    env = env_context(plan)
    masker = Masker(collect_secrets(plan, inputs, env))
    check_headers(plan, inputs, env)  # a header HTTP cannot carry: refused before the run starts
    fps = fingerprints(plan, inputs)
    wf_hash = workflow_hash(path)
    # The live state keeps no results of this attempt: the scheduler holds what templates read, while they read
    # it; a resume reads results back from the journal (those of steps whose results some template reads).
    prepared = _Prepared(path, plan, inputs, env, masker, fps, wf_hash, RunState(keep_results=set()), run_dir)
    if run_dir is None:
        return prepared
    _fold_prior(prepared, run_dir, options)
    return prepared


def _fold_prior(prepared: _Prepared, run_dir: RunDir, options: RunOptions) -> None:
    """A resume's state (the journal folded, results kept only of steps some template reads) and the
    decisions about what earlier attempts left."""
    plan = prepared.plan
    keep = {sid for sid, s in plan.steps.items() if s.referenced}
    try:
        state = run_dir.read(keep_results=keep, unmask=prepared.masker)
    except JournalCorrupt as exc:  # never a resume on part of a journal
        raise RunDamaged(run_dir.run_id, str(exc), first=False) from None
    state.keep_results = set()
    prepared.state = state
    prepared.prior = resume_plan(
        state,
        run_id=run_dir.run_id,
        workflow_hash=prepared.workflow_hash,
        fingerprints=prepared.fingerprints,
        inputs=prepared.inputs,
        secret={name for name, spec in plan.workflow.inputs.items() if spec.secret},
        env_missing=[name for name in state.env_names if os.environ.get(name) is None],
        retry_failed=options.retry_failed,
        allow_changed=options.allow_changed,
        in_doubt=options.in_doubt,
    )


def _env_names(prepared: _Prepared) -> list[str]:
    """The environment variables the run reads that are set: those its templates name, and those a stdio
    server's ``env_passthrough`` names exactly (patterns match whatever is set; they are not required). A
    resume refuses when one of them is no longer set."""
    names = {name for name, value in prepared.env.items() if value is not None}
    for planned in prepared.plan.servers.values():
        exact = [p for p in planned.server.env_passthrough or () if "*" not in p]
        names.update(passed_through(exact))
    return sorted(names)


@contextmanager
def _journal(prepared: _Prepared) -> Iterator[int | None]:
    """The journal, open for appending (after cutting a torn tail, on a resume); None without one."""
    run_dir = prepared.run_dir
    if run_dir is None:
        yield None
        return
    try:
        if prepared.prior is not None:
            fd = run_dir.open_for_append()
        else:
            fd = os.open(run_dir.journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:
        raise StateDirUnusable.from_os_error(run_dir.state_dir, exc) from None
    try:
        yield fd
    finally:
        os.close(fd)


async def _run(
    prepared: _Prepared,
    options: RunOptions,
    say: Reporter,
    watcher_factory: Callable[[Plan, RunState], Watcher] | None,
    opener: Callable[[Plan, Mapping[str, Any], Mapping[str, Any]], SessionOpener] | None,
) -> Outcome:
    plan, state = prepared.plan, prepared.state
    started = time.monotonic()
    with _journal(prepared) as fd:
        log = EventLog(fd, masker=prepared.masker, start_seq=state.last_seq, journal_format=state.journal_format)
        log.subscribe(state.apply)
        watcher = watcher_factory(plan, state) if watcher_factory is not None else None
        if watcher is not None:
            log.subscribe(watcher.observe)
        tracing = prepared.tracing
        if tracing is not None:
            prepared.traceparent = tracing.begin(
                plan.workflow.name or prepared.path.stem,
                run_id=prepared.run_dir.run_id if prepared.run_dir is not None else None,
                attempt=state.attempts + 1,
                earlier=state.traceparents,
            )
            log.subscribe(tracing.observe)
        scheduler = Scheduler(
            plan,
            inputs=prepared.inputs,
            env=prepared.env,
            opener=opener(plan, prepared.inputs, prepared.env)
            if opener is not None
            else make_opener(
                plan,
                prepared.inputs,
                prepared.env,
                legacy=state.journal_format < 2,
                max_message_size=options.max_message_size,
                redact=prepared.masker.mask,
                on_secret=oauth_secret_sink(prepared.masker),
            ),
            log=log,
            state=state,
            options=SchedulerOptions(
                concurrency=options.concurrency,
                retry=RetryPolicy(attempts=max(1, options.retry_attempts), total=options.retry_max_time),
                server_log_level=options.server_log_level,
                elicitation=options.elicitation,
                protocol=options.protocol,
                connect_timeout=DEFAULT_CONNECT_TIMEOUT if options.connect_timeout is None else options.connect_timeout,
                tracer=tracing.request if tracing is not None else None,
            ),
            prior=prepared.prior,
            on_warning=say.warn,
            cache=prepared.cache,
        )
        try:
            with single_error():
                outcome = await _drive(prepared, options, say, log, scheduler, watcher)
        except* JournalWriteError as group:
            first = group.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            run_dir = prepared.run_dir
            where = f" ({run_dir.journal})" if run_dir is not None else ""
            error = JournalWriteError(f"{first}{where}; the run stopped, calls in flight are in doubt")
            error.run_id = run_dir.run_id if run_dir is not None else None
            raise error from None
    outcome.run_id = prepared.run_dir.run_id if prepared.run_dir is not None else None
    outcome.run_dir = prepared.run_dir.path if prepared.run_dir is not None else None
    outcome.plan = plan
    outcome.duration = time.monotonic() - started
    outcome.masker = prepared.masker
    return outcome


async def _drive(
    prepared: _Prepared,
    options: RunOptions,
    say: Reporter,
    log: EventLog,
    scheduler: Scheduler,
    watcher: Watcher | None,
) -> Outcome:
    signals = prepared.signals
    async with trio.open_nursery() as outer:
        await outer.start(log.run)
        await log.commit(_opening(prepared, options))
        watching = trio.CancelScope()
        if options.watch_signals:

            async def watch() -> None:
                with watching:
                    await watch_signals(scheduler, log, options.grace, signals, say.error)

            outer.start_soon(watch)
        async with trio.open_nursery() as inner:
            if watcher is not None:
                inner.start_soon(watcher.run)
            outcome = await scheduler.run()
            if watcher is not None:
                watcher.close()
        if signals:
            outcome.exit_code = combine([outcome.exit_code, signal_exit_code(signals)])
        _record_end(log, outcome, prepared.state)
        # Stop listening for signals, let the writer flush and fsync what is left, and return.
        watching.cancel()
        log.close()
    return outcome


def _opening(prepared: _Prepared, options: RunOptions) -> RunStarted | RunResumed:
    """The run's first record of this attempt, committed before anything runs."""
    if prepared.prior is not None:
        return RunResumed(
            pid=os.getpid(),
            fingerprints=prepared.fingerprints,
            allow_changed=options.allow_changed,
            retry_failed=options.retry_failed or None,
            traceparent=prepared.traceparent,
        )
    secret, public = _public_inputs(prepared)
    identity, run_dir = prepared.identity, prepared.run_dir
    return RunStarted(
        run_id=run_dir.run_id if run_dir else None,
        workflow=str(prepared.path.resolve()),
        identity=identity.key if identity else None,
        device=identity.device if identity else None,
        inode=identity.inode if identity else None,
        workflow_hash=prepared.workflow_hash,
        inputs=public,
        fingerprints=prepared.fingerprints,
        env=_env_names(prepared),
        pid=os.getpid(),
        journal=JOURNAL_FORMAT,
        secret_inputs=secret,
        traceparent=prepared.traceparent,
    )


def _public_inputs(prepared: _Prepared) -> tuple[list[str], dict[str, Any]]:
    """The names of the secret inputs, and the inputs as written: secret inputs are never written, their values
    are the masker's (a placeholder stands for one that is not text)."""
    secret = sorted(name for name in prepared.inputs if prepared.plan.workflow.inputs[name].secret)
    public = {
        name: placeholder(f"inputs.{name}") if name in secret and not isinstance(value, str) else value
        for name, value in prepared.inputs.items()
    }
    return secret, public


def _record_end(log: EventLog, outcome: Outcome, state: RunState) -> None:
    """Closed only with a definite answer for every item; otherwise the run stays open. The record carries
    the run's counts as a process that is gone sees them (``runs`` reads them there)."""
    code = int(outcome.exit_code)
    counts = state.end_counts()
    if outcome.status is RunStatus.INTERRUPTED:
        log.record(events.RunInterrupted(status=outcome.status, exit_code=code, counts=counts))
    elif outcome.status.closed and not outcome.blocked:
        log.record(events.RunFinished(status=outcome.status, exit_code=code, outputs=outcome.outputs, counts=counts))
    else:
        log.record(events.RunStopped(status=outcome.status, exit_code=code, outputs=outcome.outputs, counts=counts))
