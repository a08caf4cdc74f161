"""``mcp-run tools`` and ``mcp-run call``: talk to one server directly, for humans and for testing."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from runner.cli.auth import add_auth_options, auth_for, token_sink
from runner.cli.options import add_elicitation, add_log_levels, add_max_message_size, add_protocol_version
from runner.errors import ConnectFailed, InvalidCall, ServerError, TransportError, UsageError
from runner.exitcodes import ExitCode
from runner.jsontext import dumps
from runner.protocol.headers import header_value_problem
from runner.protocol.mcp import LOG_LEVELS
from runner.quoting import masking
from runner.termsafe import encodable, terminal

if TYPE_CHECKING:
    from runner.connect import Target
    from runner.engine.core.events import TaskUpdated
    from runner.masking import Masker
    from runner.protocol.mcp import ContentBlock, LogMessage, Progress, Tool, ToolResult
    from runner.session import SessionOptions


SERVER_HELP = """\
The server is either a Streamable HTTP URL (http:// or https://) given as the last argument, or a
stdio command given after `--` (everything after `--` is the server's argv, run without a shell).
"""


def add_commands(
    sub: Any,
    formatter: type[argparse.HelpFormatter],
    exit_help: str,
) -> None:
    tools = sub.add_parser(
        "tools",
        help="list a server's tools",
        description="List the tools of one MCP server: name, title, annotations and arguments.\n\n" + SERVER_HELP,
        epilog="examples:\n  mcp-run tools -- mcp-run-demo\n  mcp-run tools --json "
        "http://127.0.0.1:8000/mcp\n\n" + exit_help,
        formatter_class=formatter,
    )
    _server_options(tools)
    tools.add_argument("--json", action="store_true", help="print the raw tool list as JSON")
    tools.set_defaults(handler=run_tools)

    call = sub.add_parser(
        "call",
        help="call one tool and print its result",
        description="Call one tool once, as a workflow of one step: the tool must exist and its inputSchema must\n"
        "accept the arguments (else exit 2, nothing sent); the call is made as a task when the server offers\n"
        "tasks and the tool needs or allows one. Progress, task status and log notifications go to stderr,\n"
        "the result to stdout.\n\n" + SERVER_HELP,
        epilog='examples:\n  mcp-run call --tool echo --args \'{"text": "hi"}\' -- mcp-run-demo\n'
        "  mcp-run call --tool convert_markdown --args @args.json --json http://127.0.0.1:8000/mcp\n\n" + exit_help,
        formatter_class=formatter,
    )
    _server_options(call)
    call.add_argument("--tool", required=True, metavar="NAME", help="the tool to call")
    call.add_argument(
        "--args",
        default="{}",
        metavar="JSON",
        help="the arguments as a JSON object, or @FILE to read them from a file (default: {})",
    )
    call.add_argument("--json", action="store_true", help="print the whole MCP result as JSON")
    call.add_argument("--timeout", type=_seconds, metavar="S", help="give up after S seconds in all")
    call.add_argument("--idle-timeout", type=_seconds, metavar="S", help="give up after S seconds without progress")
    call.set_defaults(handler=run_call)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", nargs="?", metavar="URL", help="a Streamable HTTP endpoint (else a command after --)")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header; repeatable. VALUE may be $VAR to take it from the environment. Never printed.",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable for a stdio server; NAME alone passes mcp-run's own value (* matches any characters: "
        "'npm_config_*'); besides these the server gets only HOME, PATH, SHELL, TERM, USER, LOGNAME, LANG, LC_ALL, "
        "TMPDIR",
    )
    parser.add_argument(
        "--cwd", metavar="DIR", help="working directory of a stdio server (default: the current directory)"
    )
    parser.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=30.0,
        metavar="S",
        help="bound on starting or reaching the server and its handshake (default: 30)",
    )
    add_log_levels(parser)
    add_max_message_size(parser)
    add_elicitation(parser)
    add_protocol_version(parser)
    add_auth_options(parser)


_CREDENTIALS_HINT = "give credentials with --header 'Authorization: Bearer $TOKEN' (from the environment)"


def _target(args: argparse.Namespace) -> tuple[Target, Masker]:
    """The server the command line names, and what it must never print: header values, and the variables
    passed from mcp-run's environment (``--env NAME``), as in a workflow (a literal ``--env NAME=VALUE`` is
    not a secret)."""
    if args.url is not None and args.server_argv:
        raise UsageError("give either a URL or a command after --, not both")
    if args.url is not None:
        return _http_target(args, args.url)
    return _stdio_target(args)


def _http_target(args: argparse.Namespace, url: str) -> tuple[Target, Masker]:
    """The URL checked as a workflow's is (:func:`runner.workflow.urls.url_problem`), before anything is
    contacted: a mistake on the command line exits 2."""
    from runner.connect import HttpTarget
    from runner.masking import Masker
    from runner.workflow.urls import url_problem

    problem = url_problem(url, _CREDENTIALS_HINT)
    if problem is not None:
        message, hint = problem
        if not url.startswith(("http://", "https://")):
            hint = "to run a command, put it after --"
        raise UsageError(f"URL: {message}" + (f"\n  hint: {hint}" if hint else ""))
    headers = _headers(args.header)
    masker = Masker({f"headers.{name}": value for name, value in headers.items()})
    auth = auth_for(args, url, masker)
    on_secret = token_sink(masker) if auth is not None else None
    http = HttpTarget(url=url, headers=headers, max_message_size=args.max_message_size, auth=auth, on_secret=on_secret)
    return http, masker


def _stdio_target(args: argparse.Namespace) -> tuple[Target, Masker]:
    """The command after ``--``, started by a workflow's rules (:func:`runner.connect.stdio_target`) but from
    the current directory: there is no workflow here."""
    from runner.connect import stdio_target
    from runner.masking import Masker

    if not args.server_argv:
        raise UsageError("no server given: add a URL, or `-- CMD ARGS...` to start a stdio server")
    if not args.server_argv[0].strip():
        raise UsageError(f"the server's program after -- is {'empty' if not args.server_argv[0] else 'blank'}")
    if args.header:
        raise UsageError("--header applies to HTTP servers only")
    if any((args.auth, args.client_id, args.client_secret, args.private_key, args.assertion)) or args.dpop is not None:
        raise UsageError("--auth and its credentials apply to HTTP servers only")
    env, secrets = _environment(args.env)
    masker = Masker(secrets)
    target = stdio_target(
        args.server_argv,
        base=os.getcwd(),
        cwd=args.cwd,
        env=env,
        max_message_size=args.max_message_size,
        redact=masker.mask,
    )
    return target, masker


def _environment(pairs: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """``--env`` as the variables a stdio server gets, and the secrets among them: NAME alone passes mcp-run's
    own value, if set (as ``docker run -e NAME``), and that one is masked."""
    from runner.launch import passed_through
    from runner.workflow.model import ENV_PATTERN

    env: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep and ENV_PATTERN.match(name):
            own = passed_through([name])
            env.update(own)
            secrets.update((f"env.{k}", v) for k, v in own.items())
        elif not sep or not name:
            raise UsageError(f"--env expects NAME=VALUE, or NAME to pass mcp-run's own value, got {pair!r}")
        else:
            env[name] = value
    return env, secrets


def _headers(pairs: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise UsageError(f"--header expects 'Name: value', got {pair.split(':')[0]!r}...")
        headers[name] = _expand_env(name, value)
        problem = header_value_problem(name, headers[name])
        if problem is not None:
            raise UsageError(f"--header {name}: {problem}; HTTP header values are ASCII")
    return headers


_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _expand_env(header: str, value: str) -> str:
    """``$VAR`` and ``${VAR}`` in a header value come from the environment (so tokens stay off argv)."""

    def sub(match: re.Match[str]) -> str:
        var = match.group(1) or match.group(2)
        if var not in os.environ:
            raise UsageError(f"--header {header}: environment variable {var} is not set")
        return os.environ[var]

    return _ENV_REF.sub(sub, value)


def _session_options(args: argparse.Namespace, masker: Masker) -> SessionOptions:
    from runner.session import SessionOptions
    from runner.session.answers import make_policy

    threshold = LOG_LEVELS.index(args.log_level)

    def on_log(message: LogMessage, related: object) -> None:
        if message.severity >= threshold:
            logger = f" {message.logger}" if message.logger else ""
            data = masker.mask_value(message.data)
            data = data if isinstance(data, str) else json.dumps(data)
            print(terminal(masker.mask(f"[{message.level}{logger}] {data}")), file=sys.stderr)

    def on_warning(text: str) -> None:
        print(f"mcp-run: warning: {terminal(masker.mask(text))}", file=sys.stderr)

    return SessionOptions(
        name="server",
        server_log_level=args.server_log_level,
        initialize_timeout=args.connect_timeout,
        protocol=args.protocol_version or "auto",
        on_log=on_log,
        on_warning=on_warning,
        answers=make_policy(args.elicitation),
    )


def run_tools(args: argparse.Namespace) -> int:
    import trio

    from runner._trio import single_error
    from runner.connect import open_target

    target, masker = _target(args)

    async def go() -> list[Tool]:
        with single_error(), _scrubbed(masker):
            async with open_target(target, _session_options(args, masker)) as session:
                try:
                    return await session.list_tools()
                except TransportError as exc:
                    # Listing tools changes nothing: a connection lost on the way leaves nothing in doubt, the
                    # server is just unreachable (exit 4), as when it cannot be started or initialized.
                    reason = str(exc).split("\n", 1)[0].removeprefix(f"{session.name}: ")
                    raise ConnectFailed(f"could not list the tools: {reason}", stderr=exc.stderr) from exc

    tools = trio.run(go)
    if args.json:
        print(dumps(masker.mask_value([t.raw for t in tools]), indent=2))
    else:
        print(terminal(masker.mask(render_tools(tools))))  # names, titles and descriptions come from the server
    return ExitCode.OK


@contextmanager
def _scrubbed(masker: Masker) -> Iterator[None]:
    """An error raised inside leaves with the secrets masked in what it prints; a value quoted into a message
    inside is masked before it is cut."""
    try:
        with masking(masker.mask):
            yield
    except Exception as exc:
        masker.scrub(exc)
        raise


def render_tools(tools: list[Tool]) -> str:
    if not tools:
        return "(the server has no tools)"
    lines = []
    for tool in tools:
        title = tool.title or tool.annotations.title
        lines.append(f"{tool.name}{f' -- {title}' if title else ''}{_hints(tool)}")
        lines.append(f"    args: {schema_summary(tool.input_schema)}")
        if tool.description:
            lines.append(f"    {tool.description.strip().splitlines()[0][:100]}")
    return "\n".join(lines)


def _hints(tool: Tool) -> str:
    """What a tool's annotations claim (hints: mcp-run trusts them only with ``trust_annotations``)."""
    a = tool.annotations
    if not a.given:
        return "  [no annotations]"
    marks = (
        ("read-only", a.read_only),
        ("idempotent", a.idempotent),
        ("destructive", a.destructive and not a.read_only),
    )
    flags = [flag for flag, on in marks if on]
    hints = f"  [{', '.join(flags)}] (hints, unverified)" if flags else ""
    if "destructive" in flags and "destructiveHint" not in a.given:
        hints = hints.replace("destructive", "destructive by default")
    return hints


def schema_summary(schema: dict[str, Any]) -> str:
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return "(none)"
    required = set(schema.get("required") or [])
    parts = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        parts.append(f"{name}: {kind}" + ("" if name in required else "?"))
    return ", ".join(parts)


def _arguments(text: str) -> dict[str, Any]:
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise UsageError(f"--args: cannot read {text[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"--args must be a JSON object, got {type(value).__name__}")
    return value


def run_call(args: argparse.Namespace) -> int:
    """A workflow step of one item, without a journal (:func:`runner.engine.calls.single.call_once`): checked
    before sending as a run and ``plan --check`` check it (an unknown tool or arguments the tool's schema
    refuses: exit 2, nothing sent), made as a task when the server offers tasks and the tool needs or allows
    one, and ending with a run's exit code for the way it ended."""
    import trio

    from runner._trio import single_error
    from runner.connect import open_target
    from runner.engine.calls.single import CallOptions, call_once, exit_code_of

    arguments = _arguments(args.args)  # a usage error (exit 2) before a server that cannot start (exit 4)
    target, masker = _target(args)

    def on_progress(p: Progress) -> None:
        total = f"/{p.total:g}" if p.total is not None else ""
        message = f" {masker.mask(p.message)}" if p.message else ""
        print(terminal(f"progress {p.progress:g}{total}{message}"), file=sys.stderr)

    def on_task(update: TaskUpdated) -> None:
        from runner.engine.core.events import task_words

        print(terminal(masker.mask(task_words(update.status, update.message, update.task_id))), file=sys.stderr)

    def on_warning(text: str) -> None:
        print(f"mcp-run: warning: {terminal(masker.mask(text))}", file=sys.stderr)

    options = CallOptions(
        timeout=args.timeout,
        idle_timeout=args.idle_timeout,
        on_progress=on_progress,
        on_task=on_task,
        on_warning=on_warning,
    )

    async def go() -> ToolResult:
        with single_error(), _scrubbed(masker):
            async with open_target(target, _session_options(args, masker)) as session:
                try:
                    return await call_once(session, _server_label(args), args.tool, arguments, options)
                except InvalidCall as exc:
                    raise CallRefused(str(exc)) from exc
                except ServerError as exc:
                    exc.exit_code = exit_code_of(exc)  # a run's, for the way its one item failed
                    raise

    result = trio.run(go)
    if args.json:
        print(dumps(masker.mask_value(result.raw), indent=2))
    else:
        print(shown_result(masker.mask(render_result(result)), sys.stdout))
    if result.is_error:
        print(f"mcp-run: error: tool {args.tool!r} reported an error", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK


class CallRefused(UsageError):
    """The call was checked before sending and refused (an unknown tool, arguments the tool's schema refuses):
    nothing was sent. Exit 2, as ``plan --check`` exits for the same finding."""


def _server_label(args: argparse.Namespace) -> str:
    """The server as messages name it: its URL, or its program's name."""
    if args.url is not None:
        return str(args.url)
    return os.path.basename(args.server_argv[0]) or str(args.server_argv[0])


def shown_result(text: str, stdout: Any) -> str:
    """A result's text for ``stdout``: on a terminal, its control characters shown as escapes
    (:func:`runner.termsafe.terminal`); to a pipe or a file, as the server sent it (a script gets the real
    text), but for lone surrogates, which UTF-8 cannot encode (``\\ud800``)."""
    try:
        tty = bool(stdout.isatty())
    except (AttributeError, ValueError):
        tty = False
    return terminal(text) if tty else encodable(text)


def render_result(result: ToolResult) -> str:
    parts = [_block_text(block) for block in result.content]
    if result.structured_content is not None and not parts:
        parts.append(dumps(result.structured_content, indent=2))
    return "\n".join(parts)


def _block_text(block: ContentBlock) -> str:
    """A content block as text: its text, else a line saying what it is (an image's size, a resource's URI)."""
    if block.text is not None:
        return block.text
    if block.type in ("image", "audio"):
        size = len(str(block.raw.get("data", ""))) * 3 // 4
        return f"[{block.type} {block.raw.get('mimeType', '?')}, about {size} bytes]"
    if block.type == "resource_link":
        return f"[resource link {block.raw.get('uri', '?')}]"
    if block.type == "resource":
        resource = block.raw.get("resource") or {}
        text = resource.get("text") if isinstance(resource, dict) else None
        return text if isinstance(text, str) else f"[resource {resource.get('uri', '?')}]"
    return f"[{block.type} block]"
