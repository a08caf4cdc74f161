"""The ``mcp-run`` command line: argument parsing, the error funnel and exit codes.

``main(argv) -> int`` is the only place that prints and exits. Library code raises errors from
:mod:`runner.errors`; the funnel here turns them into one message on stderr and the exit code of the table
in :mod:`runner.exitcodes`. Imports of trio, httpx2 and the rest are deferred to the command that needs
them, so ``mcp-run --version`` starts fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from runner import __version__
from runner.errors import McpRunError, UsageError
from runner.exitcodes import EXIT_CODE_HELP, ExitCode
from runner.termsafe import terminal

__all__ = ["main"]

COMMANDS = (
    "run",
    "validate",
    "plan",
    "resume",
    "tools",
    "call",
    "runs",
    "show",
    "logs",
    "report",
    "worker",
    "temporal-dev",
    "cancel",
    "export",
    "login",
    "logout",
)

DESCRIPTION = """\
Run Model Context Protocol tool calls as a batch: a YAML workflow of steps, each a tool call, run as a
DAG with every call journaled before it is sent, so an interrupted run resumes without calling anything
twice.

  mcp-run WORKFLOW.yaml [OPTIONS]           run a workflow (same as `mcp-run run WORKFLOW.yaml`)
  mcp-run WORKFLOW.yaml --resume            finish an interrupted run, or start one (safe in a crontab)
  mcp-run WORKFLOW.yaml --retry-failed      re-attempt, in the same run, what failed in the newest run
  mcp-run resume [WORKFLOW.yaml] RUN_ID     resume a run (RUN_ID may be abbreviated: 3f9a1c)
  mcp-run validate WORKFLOW.yaml            check it without contacting a server; `plan` shows its DAG
  mcp-run runs [WORKFLOW.yaml] | show [WORKFLOW.yaml] [RUN_ID] | logs ...
                                            inspect runs from their journals
  mcp-run report [WORKFLOW.yaml] [RUN_ID] --html PATH --junit PATH --markdown PATH
                                            a run's report page, JUnit XML, Markdown summary
  mcp-run tools -- CMD ARGS... | URL        list one server's tools
  mcp-run call --tool NAME --args JSON -- CMD ARGS... | URL
                                            call one tool and print its result

Runs are kept in --state-dir, else $MCP_RUN_STATE_DIR, else .mcp-run beside the workflow (./.mcp-run for a
command that names no workflow). Run `mcp-run COMMAND --help` for the options of one command.
"""

EXAMPLES = """\
examples:
  mcp-run workflows/convert_docs.yaml --input source=./notes --input out=./html
  mcp-run workflows/convert_docs.yaml --json > summary.json      # one JSON summary on stdout
  mcp-run tools -- mcp-run-demo
  mcp-run call --tool echo --args '{"text": "hi"}' --header 'Authorization: Bearer $TOKEN' \\
      https://example.com/mcp
"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors go through the funnel with exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}\n(see `{self.prog} --help`)")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-made layout of descriptions and epilogs; wide enough for the examples."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=100)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcp-run",
        description=DESCRIPTION,
        epilog=EXAMPLES + "\n" + EXIT_CODE_HELP,
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"mcp-run {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    from runner.cli import auth, inspect, reporting, run, servers, temporal

    run.add_commands(sub, Formatter, EXIT_CODE_HELP)
    servers.add_commands(sub, Formatter, EXIT_CODE_HELP)
    inspect.add_commands(sub, Formatter, EXIT_CODE_HELP)
    reporting.add_command(sub, Formatter, EXIT_CODE_HELP)
    temporal.add_commands(sub, Formatter, EXIT_CODE_HELP)
    auth.add_commands(sub, Formatter, EXIT_CODE_HELP)
    return parser


def _split_server_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """Options before ``--``; the server's argv after it."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _command_typo(word: str) -> UsageError | None:
    """``mcp-run valdate x``: a near-miss of a command that names no file is a typo, not a workflow."""
    from pathlib import Path

    if Path(word).exists() or "/" in word or "." in word:
        return None
    import difflib  # only for a word that may be a typo: `mcp-run FILE` never needs it

    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    if not close:
        return None
    return UsageError(f"unknown command {word!r}; did you mean {close[0]!r}? (see `mcp-run --help`)")


def _print_json_error(exc: McpRunError) -> None:
    """Under ``--json``, the error as one JSON object on stdout (``schemas/error.schema.json``) as well."""
    from runner.jsontext import dumps
    from runner.schemas import ErrorReport, Problem

    located = getattr(exc, "errors", None) or ([exc] if hasattr(exc, "line") else [])
    problems = [Problem.model_validate(e, from_attributes=True) for e in located]  # a WorkflowError's fields
    report = ErrorReport(
        version=1,
        status="nothing-to-do" if exc.exit_code == ExitCode.OK else "error",
        exit_code=int(exc.exit_code),
        message=str(exc),
        problems=problems,
    )
    print(dumps(report.model_dump(), indent=2))


def _never_raise_on_output() -> None:
    """Text stdout cannot encode (a lone surrogate from a file name or a command line that is not UTF-8, which
    every sink should have escaped already) is written as an escape (``\\udcff``) rather than end the
    command with a traceback; stderr does this by default."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")


AS_PROGRAM = False
"""True once :func:`main` runs as the ``mcp-run`` program (``argv`` None): the Temporal commands then leave by
``os._exit`` (see :func:`runner.cli.temporal.leaves_by_exit`); called with an argv (tests), they return."""


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mcp-run`` command: its exit code, whether or not anyone still reads what it prints (a pipe closed
    early never cuts a run or changes its exit code: :mod:`runner.pipes`)."""
    from runner.pipes import readers_may_leave

    with readers_may_leave():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    global AS_PROGRAM
    AS_PROGRAM = argv is None
    args_list = list(sys.argv[1:] if argv is None else argv)
    json_output = "--json" in _split_server_argv(args_list)[0]
    _never_raise_on_output()
    options: list[str] = []
    try:
        options, server_argv = _split_server_argv(_as_command(args_list))
        if options == ["--version"]:  # what argparse's version action prints, without building every command
            print(f"mcp-run {__version__}")
            return ExitCode.OK
        parser = build_parser()
        if not options:
            parser.print_help(sys.stderr)
            return ExitCode.USAGE
        args = parser.parse_args(options)
        args.server_argv = server_argv
        handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
        if handler is None:
            raise UsageError(f"command {args.command!r} is not available yet")
        return handler(args)
    except McpRunError as exc:
        if json_output and options[:1] == ["validate"]:  # validate's own report, whatever stopped it
            from runner.cli.run import validate_refused, validate_target

            return validate_refused(validate_target(options[1:]), exc)
        return report_error(exc, json=json_output)
    except KeyboardInterrupt:
        print("mcp-run: interrupted", file=sys.stderr)
        return ExitCode.SIGINT
    except BrokenPipeError:
        # A stream that is a terminal closed early (others are guarded): not an error of ours.
        return ExitCode.OK


def _as_command(args_list: list[str]) -> list[str]:
    """The arguments with their command: ``mcp-run FILE ...`` means ``mcp-run run FILE ...``, unless the first
    word is a near-miss of a command (a typo, refused)."""
    if not args_list or args_list[0].startswith("-") or args_list[0] in COMMANDS:
        return args_list
    typo = _command_typo(args_list[0])
    if typo is not None:
        raise typo
    return ["run", *args_list]


def report_error(exc: McpRunError, *, json: bool) -> int:
    """The error funnel: one message on stderr (and, under ``--json``, the error as JSON on stdout); the exit
    code of its kind. Every command's refusal leaves through here."""
    print(f"mcp-run: {'error: ' if exc.exit_code != ExitCode.OK else ''}{terminal(str(exc))}", file=sys.stderr)
    if json:
        _print_json_error(exc)
    return int(exc.exit_code)
