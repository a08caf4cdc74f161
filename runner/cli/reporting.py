"""``mcp-run report [WORKFLOW] [RUN_ID] --html PATH --junit PATH --markdown PATH`` (``--engine temporal``: a run on
Temporal, from its workflow's history, as ``show`` reads it): a run as files to open or to
attach to a CI job, from its journal alone (no server is contacted); and the Markdown summary ``mcp-run
WORKFLOW`` appends to ``$GITHUB_STEP_SUMMARY`` when it is set.

The run is chosen as ``show`` chooses it (:func:`runner.cli.inspect.run_target`). The report model is
:mod:`runner.report.model`'s; this module only finds the run, names the commands to paste, and writes files.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import UsageError
from runner.exitcodes import ExitCode
from runner.termsafe import terminal

if TYPE_CHECKING:
    from runner.engine.core.events import Entry
    from runner.engine.journal.reader import JournalCorrupt
    from runner.engine.journal.rundir import RunDir
    from runner.report.model import RunReportModel

__all__ = ["add_command", "append_step_summary", "report_command", "report_of"]

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


class _Entries:
    """The entries of a journal up to its first bad line (``damaged`` says what is wrong there)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.damaged: JournalCorrupt | None = None

    def __iter__(self) -> Iterator[Entry]:
        from runner.engine.journal.reader import JournalCorrupt, iter_journal

        try:
            with self.path.open("rb") as f:
                yield from iter_journal(f, source=str(self.path))
        except JournalCorrupt as exc:
            self.damaged = exc
        except OSError as exc:
            self.damaged = JournalCorrupt(f"cannot be read: {exc.strerror or exc}", file=str(self.path))


def _edges(workflow: str | None) -> dict[str, tuple[str, ...]]:
    """The steps' dependencies, from the workflow file when it is still there and valid (the journal does not
    hold them); none otherwise."""
    from runner.errors import McpRunError
    from runner.workflow.loader import validate

    if workflow is None or not Path(workflow).is_file():
        return {}
    try:
        plan = validate(workflow)
    except (McpRunError, OSError, ValueError):
        return {}
    return {sid: tuple(plan.steps[sid].dependencies) for sid in plan.order}


def report_of(run_dir: RunDir, state_dir: Path | None) -> tuple[RunReportModel, JournalCorrupt | None]:
    """The report of the run in ``run_dir``, and where its journal is damaged (None when it is not)."""
    from runner import __version__
    from runner.cli.where import decision_lines, resume_hint
    from runner.engine.journal.rundir import is_locked
    from runner.report.model import build

    live = is_locked(run_dir.path) is not None
    damaged = run_dir.damage()
    entries = _Entries(run_dir.journal)
    recorded = run_dir.workflow()
    resume = resume_hint(state_dir, run_dir.run_id, recorded)
    decisions = [line.strip() for line in decision_lines(lambda flag: f"{resume} {flag}", "")]
    edges = _edges(recorded)
    # The fold makes an object or two per item and frees none until the end: the collector's passes over them
    # would find nothing (a fifth of the time of a 100,000-item report).
    gc.disable()
    try:
        model = build(
            iter(()) if damaged is not None else entries,
            live=live,
            status="running" if live else None,
            version=__version__,
            decisions=decisions,
            edges=edges,
        )
    finally:
        gc.enable()
    damaged = damaged or entries.damaged
    if damaged is not None:
        from dataclasses import replace

        model = replace(model, status="damaged")
    return model, damaged


def _write(path: str, text: str, *, append: bool = False) -> None:
    target = Path(path)
    try:
        with target.open("a" if append else "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _writer(args: argparse.Namespace) -> Callable[[RunReportModel], list[str]]:
    """What writes the files ``args`` asks for, from a report model (returns their names)."""

    def write(model: RunReportModel) -> list[str]:
        written = []
        if args.junit:
            from runner.report.junit import junit_xml

            _write(args.junit, junit_xml(model))
            written.append(args.junit)
        if args.markdown:
            from runner.report.markdown import markdown

            _write(args.markdown, markdown(model))
            written.append(args.markdown)
        if args.html:
            from runner.report.html import html_page

            _write(args.html, html_page(model))
            written.append(args.html)
        return written

    return write


def report_command(args: argparse.Namespace) -> int:
    from runner.cli.inspect import run_target

    if not (args.html or args.junit or args.markdown):
        raise UsageError("say what to write: --html PATH, --junit PATH and/or --markdown PATH")
    if args.engine == "temporal":
        from runner.cli.temporal_inspect import report_temporal

        return report_temporal(args, _writer(args))
    state_dir, _workflow, run_dir = run_target(args)
    model, damaged = report_of(run_dir, state_dir)
    written = _writer(args)(model)
    print(terminal(f"run {run_dir.run_id}: {model.status}; wrote {', '.join(written)}"), file=sys.stderr)
    if damaged is not None:
        print(terminal(f"mcp-run: error: {damaged} (reported: what comes before it)"), file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK


def append_step_summary(run_dir: Path | None, state_dir: Path, warn: Callable[[str], None]) -> None:
    """Append the Markdown summary of the run in ``run_dir`` to ``$GITHUB_STEP_SUMMARY`` when it is set (a GitHub
    Actions job); a file that cannot be written is a warning (``warn(text)``), never the run's failure."""
    target = os.environ.get(STEP_SUMMARY)
    if not target or run_dir is None:
        return
    from runner.engine.journal.rundir import RunDir
    from runner.report.markdown import markdown

    model, _damaged = report_of(RunDir(run_dir), state_dir)
    try:
        _write(target, markdown(model) + "\n", append=True)
    except UsageError as exc:
        warn(f"{STEP_SUMMARY}: {exc}")


def add_command(sub: Any, formatter: type[argparse.HelpFormatter], exit_help: str) -> None:
    from runner.cli.inspect import TARGET_HELP, add_engine, add_state_dir, add_target

    parser: argparse.ArgumentParser = sub.add_parser(
        "report",
        help="write a run's report: HTML page, JUnit XML, Markdown summary",
        usage="%(prog)s [WORKFLOW] RUN_ID [options]\n       %(prog)s WORKFLOW [options]",
        description="Write the report of a run from its journal alone (no server is contacted): a self-contained\n"
        "HTML page (steps, calls per server over time, failures grouped by error, the items in doubt and the\n"
        "commands that decide about them), JUnit XML (a testcase per item, for CI dashboards) and a short\n"
        "Markdown summary. Secrets are shown as the journal holds them: masked.\n\n"
        + TARGET_HELP
        % {"command": "mcp-run report"},
        epilog="examples:\n  mcp-run report workflows/convert_docs.yaml --html report.html\n"
        "  mcp-run report 3f9a1c --junit junit.xml --markdown summary.md\n\n" + exit_help,
        formatter_class=formatter,
    )
    add_target(parser)
    add_state_dir(parser)
    parser.add_argument("--html", metavar="PATH", help="write the HTML page here")
    parser.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    parser.add_argument("--markdown", metavar="PATH", help="write the Markdown summary here")
    add_engine(parser)
    parser.set_defaults(handler=report_command)
