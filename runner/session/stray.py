"""What the server sent that matched nothing: counted for the whole session, shown only the first few times.

Two kinds are shown (through the session's ``on_warning``, with the raw text cut and escaped) the first
``WARN_FIRST`` times each, then once more to say that further ones are only counted:

- input that is not JSON-RPC (on stdio, mostly log lines printed to stdout instead of stderr), unless it
  could be tied to a call, which then fails with it;
- responses whose id matches no request we sent (``"7"`` for our ``7``: ids are matched exactly).

Late responses, to ids we issued and stopped waiting for (a timeout, a cancellation), are expected: they
are counted, never shown. The first input that was not JSON-RPC is kept: when the handshake fails, its
error quotes it (a server that logs to stdout is the usual reason).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from runner.protocol.jsonrpc import ErrorResponse, InvalidMessage, Response, encode
from runner.session.text import quote, quote_id

__all__ = ["WARN_FIRST", "SessionStats", "StrayInput"]

WARN_FIRST: Final = 3  # of each kind of stray input, how many are shown before they are only counted


@dataclass(frozen=True, slots=True)
class SessionStats:
    """What the server sent that matched nothing, counted since the session started.

    ``invalid_lines``: messages that are not JSON-RPC (on stdio: lines on stdout). ``unmatched_responses``:
    responses and error responses whose id matches no request we ever sent. ``late_responses``: responses to
    requests we stopped waiting for (timeout, cancellation), which are expected and never warned about.
    """

    invalid_lines: int = 0
    unmatched_responses: int = 0
    late_responses: int = 0


class StrayInput:
    """The counts and warnings of one session (see the module docstring). ``name`` starts each warning;
    ``on_stdout`` says the peer is a stdio server, whose stray text was on stdout (which says what to fix)."""

    def __init__(self, name: str, *, on_stdout: bool, warn: Callable[[str], None]) -> None:
        self._name = name
        self._on_stdout = on_stdout
        self._warn = warn
        self._invalid = 0
        self._invalid_shown = 0  # of those not tied to a pending call (the others fail their call)
        self._first_invalid: bytes | None = None
        self._unmatched = 0
        self._late = 0

    @property
    def stats(self) -> SessionStats:
        return SessionStats(self._invalid, self._unmatched, self._late)

    @property
    def first_invalid(self) -> bytes | None:
        """The first input that was not JSON-RPC, raw (``None``: there was none)."""
        return self._first_invalid

    @property
    def on_stdout(self) -> bool:
        return self._on_stdout

    def invalid(self, event: InvalidMessage, *, failed_a_call: bool) -> None:
        """Count input that is not JSON-RPC; warn about it unless it ``failed_a_call`` (which says so)."""
        self._invalid += 1
        if self._first_invalid is None:
            self._first_invalid = event.raw
        if failed_a_call:
            return
        self._invalid_shown += 1
        if self._invalid_shown > WARN_FIRST + 1:
            return
        what, further = ("a line on stdout", "lines") if self._on_stdout else ("a message", "messages")
        if self._invalid_shown > WARN_FIRST:
            self._warn(f"{self._name}: more output that is not JSON-RPC; further {further} are only counted")
            return
        reason = "not JSON" if event.error.startswith("not JSON") else event.error
        self._warn(f"{self._name}: ignored {what} that is not JSON-RPC ({reason}): {quote(event.raw)}")

    def unmatched(self, event: Response | ErrorResponse, *, last_issued: int) -> None:
        """A response no pending request waits for: late (an id up to ``last_issued``, which we gave up
        on) or unmatched."""
        rid = event.id
        if type(rid) is int and 0 < rid <= last_issued:
            self._late += 1  # we stopped waiting for it (timeout, cancellation): expected
            return
        self._unmatched += 1
        count = self._unmatched
        if count > WARN_FIRST + 1:
            return
        if count > WARN_FIRST:
            self._warn(f"{self._name}: more responses that match no request; further ones are only counted")
            return
        if rid is None:
            what = "an error response with a null id"
        else:
            what = f"a response with id {quote_id(rid)}, which matches no request we sent"
            if isinstance(rid, str) and rid.isdigit() and 0 < int(rid) <= last_issued:
                what += f" (ids are matched exactly: we sent the number {int(rid)}, not the string {quote_id(rid)})"
        self._warn(f"{self._name}: ignored {what}: {quote(encode(event), quotes=False)}")
