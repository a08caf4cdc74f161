"""Shared test settings: a derandomized, deadline-free hypothesis profile in CI; and, once the suite has
run, a check that every journal it produced reads the same in `runs`, `show` and the summary.

Where things are: test doubles in ``tests/fakes/`` (the in-memory scripted server and the stdio fakes); real
peers in ``tests/peers/``, started by the integration and end-to-end tests (see ``tests/integration/peers.py``);
helpers in ``tests/support.py`` (typed journal entries; the ``preexec_fn`` of a child a test interrupts),
``tests/harness.py`` (the scheduler on fake servers), ``tests/auth_world.py`` (the scripted OAuth world and
the providers and sessions that talk to it) and ``tests/e2e/support.py`` (``mcp-run`` as a subprocess, the
loopback OAuth server; its fixture is in ``tests/e2e/conftest.py``). Test modules import helpers from those,
never from each other.

Markers: ``integration`` (a real peer over pipes or sockets) and ``slow`` (more than ~5 s on a 2-CPU machine:
the crash, restart, interrupt and race tests). The default run and CI run everything; for a quick local loop,
skip the slow ones::

    scripts/test.sh -q -m "not slow"
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=200, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A clock given by ``usefixtures("autojump_clock")`` never reaches ``trio.run``: pytest-trio hands it only a
    test's own arguments, so such a test ran on the real clock, waiting out every timeout (two modules did).
    Refused here, so the virtual clock is always asked for as an argument."""
    for item in items:
        for mark in item.iter_markers("usefixtures"):
            if any("clock" in str(name) for name in mark.args):
                raise pytest.UsageError(
                    f"{item.nodeid}: usefixtures{mark.args} does not reach trio.run (pytest-trio passes only a "
                    "test's own arguments): take the clock as an argument, e.g. autojump_clock: trio.abc.Clock"
                )


@pytest.fixture(autouse=True)
def no_ci_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a GitHub Actions job, ``mcp-run FILE`` appends its summary to ``$GITHUB_STEP_SUMMARY``: the suite's
    thousands of runs (and their children, which inherit the environment) must not fill the job's page. A test
    of that summary sets the variable itself."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def journal_counts_agree(journal: Path) -> list[str]:
    """Where `runs`, `show` and the run's summary would disagree about a journal's items (empty: they agree;
    unreadable journals, which some tests write on purpose, are not compared). `runs` reads a run that ended
    at its two ends (the counts its last record carries): this checks those against the fold."""
    import time

    from runner.cli.runrecord import load, run_record, show_record
    from runner.engine.journal.listing import summarize
    from runner.engine.journal.reader import read_journal
    from runner.engine.journal.rundir import RunDir
    from runner.errors import McpRunError

    try:
        state = read_journal(journal, keep_results=set())
    except (McpRunError, OSError):
        return []
    loaded = load(RunDir(journal.parent))
    listing = summarize(RunDir(journal.parent))  # as `runs` reads it: maybe its two ends only
    if loaded.summary.damaged is not None:
        return []
    if listing.damaged is not None:
        return [f"{journal}: `runs` says damaged ({listing.damaged}), `show` reads it"]
    now = time.time()
    listed = run_record(listing, now)["items"]
    shown = show_record(loaded, now)["steps"].values()
    summed = {name: sum(step[name] for step in shown) for name in ("succeeded", "failed", "in_doubt")}
    summary = {name: 0 for name in ("succeeded", "failed", "in_doubt")}
    for step in state.steps.values():
        counts = step.counts(live=loaded.running_pid is not None).as_dict()
        for name in summary:
            summary[name] += counts[name]
    problems = []
    for name in summary:
        if not listed[name] == summed[name] == summary[name]:
            problems.append(f"{journal}: {name}: runs {listed[name]}, show {summed[name]}, summary {summary[name]}")
    return problems


@pytest.fixture(scope="session", autouse=True)
def every_journal_reads_the_same_everywhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the whole suite: every journal any test produced is folded, and `runs`, `show` and the summary
    count its items the same way (they read one RunState; this keeps it so)."""
    yield
    base = tmp_path_factory.getbasetemp()
    problems = [p for journal in sorted(base.rglob("journal.jsonl")) for p in journal_counts_agree(journal)]
    assert not problems, "\n".join(problems[:20])
