"""The errors mcp-run raises, named by who caused the failure.

Every error carries the exit code the CLI turns it into (see :mod:`runner.exitcodes`); each is public from
:mod:`runner` (``runner.UnfinishedRun``), wherever it is defined (in brackets when not here)::

    McpRunError                       base of everything below
    ├── UsageError                    (2) the command line (or the API's options) asked for something impossible
    │   ├── UnfinishedRun             (2) an earlier run is unfinished: --resume or --new-run [engine.core.resume]
    │   ├── RunDamaged                (2) the run's journal cannot be read far enough to resume [engine.core.resume]
    │   ├── NoRunToRetry              (2) --retry-failed found no run [engine.core.resume]
    │   ├── NoUnfinishedRun           (2) ``resume WORKFLOW`` found no open run [engine.core.resume]
    │   ├── RunAlreadyFinished        (2) the run named is closed [engine.core.resume]
    │   ├── EnvironmentChanged        (2) an environment variable the run read changed [engine.core.resume]
    │   ├── RunChanged                (2) the workflow or inputs changed since the run started [engine.core.resume]
    │   ├── UnknownRun                (2) no run has that id [engine.journal.rundir]
    │   ├── AmbiguousRun              (2) a short id that names several runs [engine.journal.rundir]
    │   ├── StateDirUnusable          (2) the state directory cannot keep runs [engine.preflight]
    │   ├── OutputUnusable            (2) --output cannot be written [engine.preflight]
    │   └── OpenRunChanged            (2) the open run on Temporal was started from another definition
    ├── WorkflowError                 (2) the workflow file is invalid: file, line, column, key path
    │   ├── WorkflowErrors            (2) several of them, found in one pass [workflow.positions]
    │   └── TemplateSyntaxError       (2) a ${{ }} template that cannot be compiled [workflow.expressions]
    ├── BusyError                     (6) another process holds the run
    │   ├── WorkflowBusy              (6) another process holds the workflow's lock [engine.journal.rundir]
    │   └── RunAlreadyOpen            (6) a run of the file is open on Temporal
    ├── InvalidCall                   (1) refused before sending: no such tool, or arguments its schema refuses
    ├── TemplateError                 (1) a template failed while rendering [workflow.template]
    ├── NothingToRetry                (0) --retry-failed found a run that succeeded [engine.core.resume]
    ├── JournalCorrupt                (2) a journal line that is not an event [engine.journal.reader]
    ├── JournalWriteError             (1) the journal could not be written: the run stops [engine.journal.writer]
    ├── TemporalUnreachable           (4) Temporal's frontend could not be reached
    ├── RunEndedWithoutResult         (1) the run's workflow on Temporal was cancelled or terminated
    └── ServerError                   something went wrong talking to an MCP server
        ├── TransportError            the connection failed; ``written`` says if the request went out
        │   ├── ConnectFailed         (4) could not start, reach or initialize the server
        │   │   ├── LaunchError       (4) a stdio server that cannot start as described [launch]
        │   │   ├── ServerUnreachable (4) the run gave up reconnecting to a server [engine.calls.servers]
        │   │   └── AuthFailed        (4) the server's authorization failed [auth.errors]
        │   │       └── LoginRequired (4) ``mcp-run login`` first [auth.errors]
        │   ├── NotDelivered          (4) the request surely never reached the server: safe to retry
        │   │   ├── SessionExpired    (4) the server forgot our session (HTTP 404): re-initialize
        │   │   └── Throttled         (4) the server said "not now" (429, 503 + Retry-After): wait, resend
        │   ├── HTTPStatusError       (4/3) the server refused the request with an HTTP status
        │   └── OutcomeUnknown        (5) the request was written but its result is lost: *in doubt*
        │       ├── CallTimeout       (5) no result in time; cancellation was sent
        │       ├── TaskNotFollowed   (5) the server made the call a task mcp-run does not follow [session.results]
        │       ├── TaskLost          (5) the server no longer knows the call's task [engine.calls.task]
        │       ├── TaskNotCollected  (5) ``mcp-run call``'s task result could not be collected [engine.calls.single]
        │       └── TaskUnfinished    (5) the task ended without a result [engine.calls.task]
        ├── ProtocolError             (3) the server broke the protocol or answered with an error
        │   ├── JsonRpcError          (3) a JSON-RPC error response: ``code``, ``message``, ``data``
        │   ├── MalformedMessage      (3) bytes that are not a valid JSON-RPC message
        │   ├── FrameTooLarge         (3) a message over the size cap
        │   ├── UnsupportedProtocolVersion (3) the server chose a version we do not speak
        │   └── ResultNotSupported    (3) a kind of result mcp-run cannot act on yet [session.results]
        └── ToolError                 (1) the tool ran and reported failure (``isError: true``) [protocol.mcp]

Internal, never met by a caller (caught where they are raised), so neither public nor drawn: ``Drained`` and
``TaskUncollected`` (:mod:`runner.engine.calls`), ``CannotCheck`` and its kinds (:mod:`runner.workflow.argcheck`:
the call goes out unchecked), ``PlanCheckFailed`` (``mcp-run plan --check``) and ``CallRefused`` (``mcp-run call``,
refused before sending).

Errors are translated at the boundary where they happen, with the cause kept in ``__cause__``.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Final

from runner.exitcodes import ExitCode

__all__ = [
    "BusyError",
    "CallTimeout",
    "ConnectFailed",
    "FrameTooLarge",
    "HTTPStatusError",
    "InvalidCall",
    "JournalWriteError",
    "JsonRpcError",
    "MalformedMessage",
    "McpRunError",
    "NotDelivered",
    "OpenRunChanged",
    "OutcomeUnknown",
    "ProtocolError",
    "RunAlreadyOpen",
    "RunEndedWithoutResult",
    "ServerError",
    "SessionExpired",
    "TemporalUnreachable",
    "Throttled",
    "TransportError",
    "UnsupportedProtocolVersion",
    "UsageError",
    "WorkflowError",
    "first_line",
    "printable",
]

STDERR_TAIL_LINES: Final = 10  # lines of a server's stderr shown with a connection error
STDERR_LINE_CHARS: Final = 300  # each cut to this many characters

_ESCAPES: Final = {"\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control and formatting characters (ANSI escapes, ``\\r``, a
    bidirectional override) become escapes such as ``\\x1b``, ``\\r``, ``\\u202e``; tabs and spaces stay."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or ch == "\t" or unicodedata.category(ch) == "Zs":
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


class McpRunError(Exception):
    """Base of every error mcp-run raises on purpose."""

    exit_code: ExitCode = ExitCode.FAILED


class UsageError(McpRunError):
    """The command line asked for something impossible."""

    exit_code = ExitCode.USAGE


class WorkflowError(McpRunError):
    """An invalid workflow, located as precisely as the input allows.

    ``str()`` renders ``file:line:col: path: message`` (parts that are unknown are left out), followed by
    a suggestion on its own line when one is obvious.
    """

    exit_code = ExitCode.USAGE

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
        suggestion: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.suggestion = suggestion
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        if self.path:
            where += f"{self.path}: "
        text = where + self.message
        if self.suggestion:
            text += f"\n  hint: {self.suggestion}"
        return text


class BusyError(McpRunError):
    """Another process holds the run's lock."""

    exit_code = ExitCode.BUSY

    def __init__(self, message: str, *, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class InvalidCall(McpRunError):
    """A tool call checked against the server's tool list before it was sent, and refused: the server has no
    such tool, or the tool's ``inputSchema`` refuses the arguments. Nothing was sent, so a resume (or
    ``--retry-failed``, once the workflow or the server is fixed) may make the call."""

    exit_code = ExitCode.FAILED


class ServerError(McpRunError):
    """Base of failures that happen while talking to an MCP server."""

    server: str | None = None


class TransportError(ServerError):
    """The connection to the server failed.

    ``written`` is False when the request surely never reached the server (safe to send again) and True
    when it may have (its outcome is unknown). ``stderr`` holds the tail of a stdio server's stderr.
    """

    exit_code = ExitCode.UNREACHABLE
    written: bool = False
    retryable: bool = False
    """Worth another try later (the server may be back): decided where the failure is classified."""

    def __init__(self, message: str, *, stderr: str | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr

    def __str__(self) -> str:
        """The message, then the server's last stderr lines, each on its own line (indented, control
        characters escaped, long lines cut): display code shows the first line where space is short and
        everything where it is not."""
        text = super().__str__()
        lines = [line.rstrip() for line in (self.stderr or "").splitlines()]
        lines = [line for line in lines if line][-STDERR_TAIL_LINES:]
        if lines:
            text += "\n  server stderr (last lines):"
            for line in lines:
                shown = printable(line)
                if len(shown) > STDERR_LINE_CHARS:
                    shown = shown[: STDERR_LINE_CHARS - 1] + "…"
                text += "\n    " + shown
        return text


class ConnectFailed(TransportError):
    """The server could not be started, reached or initialized. ``retryable`` when it may be reached later
    (it refused connections, or said it is briefly unavailable), not when it is misconfigured."""

    def __init__(self, message: str, *, stderr: str | None = None, retryable: bool = False) -> None:
        super().__init__(message, stderr=stderr)
        self.retryable = retryable


class NotDelivered(TransportError):
    """The request surely never reached the server; sending it again is safe."""

    retryable = True


class SessionExpired(NotDelivered):
    """The server answered 404 to a request that carried our session id: the session is gone."""


class Throttled(NotDelivered):
    """The server refused the request for now, before running it: HTTP 429 (too many requests), or 503
    (unavailable) that says when to come back. Not run, so safe to send again, after ``retry_after`` seconds
    when the server said (its ``Retry-After``, or a ``retry_after`` / ``retry_after_seconds`` field in its
    error body; ``None``: it did not). The server's link pauses every call to it (:mod:`runner.engine.calls.pace`)."""

    def __init__(self, message: str, *, status_code: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class HTTPStatusError(TransportError):
    """The server refused a request with an HTTP status (kept: a 401 is not a 500)."""

    RETRYABLE_STATUS = frozenset({429, 502, 503, 504})

    def __init__(self, message: str, *, status_code: int, location: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.location = location
        self.retryable = status_code in self.RETRYABLE_STATUS
        # (code, message, data) when the body was a JSON-RPC error (2026-07-28 servers answer 4xx with one); a
        # JSON-RPC error body also says the server speaks JSON-RPC over POST at that URL (not a legacy one)
        self.rpc_error: tuple[int, str, Any] | None = None

    @property
    def jsonrpc_error(self) -> bool:
        """The refusal's body was a JSON-RPC error: the server speaks JSON-RPC over POST at that URL."""
        return self.rpc_error is not None


class OutcomeUnknown(TransportError):
    """The request was written, and its result is lost: the call may or may not have happened."""

    exit_code = ExitCode.OUTCOME_UNKNOWN
    written = True


class CallTimeout(OutcomeUnknown):
    """No result within the timeout; ``notifications/cancelled`` was sent. The server may have acted.
    ``idle`` when it was the time without progress that ran out, not the hard cap."""

    def __init__(self, message: str, *, idle: bool = False, stderr: str | None = None) -> None:
        super().__init__(message, stderr=stderr)
        self.idle = idle


class ProtocolError(ServerError):
    """The server broke the protocol or answered with a JSON-RPC error."""

    exit_code = ExitCode.PROTOCOL


class JsonRpcError(ProtocolError):
    """The server answered a request with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None, *, method: str | None = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        prefix = f"{method}: " if method else ""
        super().__init__(f"{prefix}server error {code}: {message}")


class MalformedMessage(ProtocolError):
    """Bytes from the server that are not a valid JSON-RPC message."""


class FrameTooLarge(ProtocolError):
    """A single message exceeded the size cap; the connection is failed instead of growing memory."""

    OPTION: Final = "--max-message-size"
    """The option of ``run``, ``resume``, ``call`` and ``tools`` that sets the cap."""

    @classmethod
    def over(cls, what: str, cap: int, size: int, *, how: str = "") -> FrameTooLarge:
        """``what`` (``a message from the server``, ``a server-sent event``...) was ``size`` bytes or more
        (``how``: `` without a newline``), over ``cap``: the message names both and the option that raises
        the cap."""
        return cls(
            f"{what} exceeded the {cap:,}-byte cap (at least {size:,} bytes{how}); raise the limit with "
            f"{cls.OPTION} if this is expected"
        )


class UnsupportedProtocolVersion(ProtocolError):
    """The server chose a protocol version this client does not speak."""

    def __init__(self, offered: str, chosen: str) -> None:
        self.offered = offered
        self.chosen = chosen
        super().__init__(
            f"server chose protocol version {chosen!r}, which mcp-run does not support (we offered {offered!r})"
        )


class JournalWriteError(McpRunError):
    """The journal could not be written (disk full, permissions): the run stops rather than go on blind.
    ``run_id``: the run, when the lifecycle knows it (the CLI prints how to resume it)."""

    run_id: str | None = None


class TemporalUnreachable(McpRunError):
    """Temporal's frontend could not be reached (exit 4)."""

    exit_code = ExitCode.UNREACHABLE


class RunEndedWithoutResult(McpRunError):
    """The run's workflow on Temporal was cancelled or terminated (exit 1)."""

    exit_code = ExitCode.FAILED


class RunAlreadyOpen(BusyError):
    """A run of the workflow file is open on Temporal (``run_id``, None when it could not be read): no second
    one starts beside it. ``waiting``: it waits for a decision about items in doubt (None when no worker said).
    Exit 6, as a local start that finds the workflow's lock held by a running process."""

    def __init__(self, run_id: str | None, workflow: str, *, waiting: bool | None = None) -> None:
        super().__init__(f"run {run_id or '(unknown)'} of {workflow} is open on Temporal")
        self.run_id = run_id
        self.workflow = workflow
        self.waiting = waiting


class OpenRunChanged(UsageError):
    """A resume on Temporal found the file's open run started from another definition (``changes``: what
    differs, the workflow text or inputs): on Temporal a run goes on with the definition it started with."""

    def __init__(self, run_id: str, workflow: str, changes: list[str]) -> None:
        super().__init__(
            f"run {run_id} of {workflow} cannot be resumed as is:\n  - "
            + "\n  - ".join(changes)
            + "\nOn Temporal the run goes on with the definition it started with (--allow-changed is not "
            "available there)."
        )
        self.run_id = run_id
        self.workflow = workflow
        self.changes = changes


def first_line(error: BaseException | str) -> str:
    """The first line of an error's text: what a one-line message shows (the rest, a server's stderr tail,
    is shown on lines of its own)."""
    return str(error).split("\n", 1)[0]
