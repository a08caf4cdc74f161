"""What a run knows of each server's tools, and the check every call passes before it is sent.

Before the first call on a session, the server's tools are listed (``tools/list``: one request, or one per
page, per session). The session keeps the list until the server says it changed
(``notifications/tools/list_changed``) or the session is renewed; the next call then lists them again
(lazily: nothing is listed for a server no call is waiting for). Each call is then checked, once, on the
session it is about to go out on:

- its tool exists; else :class:`~runner.errors.InvalidCall`: ``server time has no tool 'get_time'; did you
  mean 'get_current_time'?``;
- its arguments validate against the tool's ``inputSchema``, compiled once per session (and again only if a
  new list changes that schema); else :class:`~runner.errors.InvalidCall` naming each argument's path:
  ``args.out_dir: 3 is not of type 'string' (refused by the inputSchema of convert_markdown; not sent)``.

Nothing is sent in either case; the failure kind is ``invalid-call`` (definite, not in doubt), so a resume or
``--retry-failed`` calls it once the workflow or the server is fixed.

The check never fails a call for a reason of its own: a server that cannot list its tools (it answers
``tools/list`` with an error) is warned about once, and its calls on that session go out unchecked; a
connection lost while listing is left to the call, which finds the same. A server that answers nothing to
``tools/list`` within ``connect_timeout`` (it answered ``initialize``, then stopped reading or answering) is
not ready: the check raises ``NotDelivered`` (the call was not sent, nor is any other on that session), the
call reports the session lost to its link, and waits for the next session as after any loss; a link that
cannot get an answering session within its budget fails, and its calls end "not sent" (exit 4, the run stays
open). A tool whose
``inputSchema`` is not a valid schema (or refers to one that cannot be found) is warned about once, and its
calls go out unchecked. So is a tool whose schema has a pattern that searched an argument for longer than
:data:`~runner.workflow.argcheck.PATTERN_TIMEOUT` (it backtracks too much): that call and the tool's later ones
on this tool list go out unchecked, so a slow pattern holds the run up once, not once per item.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from runner.errors import CallTimeout, InvalidCall, McpRunError, NotDelivered, first_line
from runner.protocol.mcp import Tool
from runner.session import Session
from runner.workflow import argcheck
from runner.workflow.suggest import did_you_mean

__all__ = ["ToolChecks"]

_UNCHECKED = "its calls go out without checking their arguments"
_SHOWN_TOOLS = 12  # an unknown tool's message lists at most this many of the server's tools


@dataclass(slots=True)
class _Listed:
    """One tool list of a session: the list object the session returned (a new one means a new list), the
    tools by name, and the validators compiled from their schemas so far (None: the schema is unusable)."""

    source: list[Tool]
    tools: dict[str, Tool]
    validators: dict[str, argcheck.ArgsValidator | None] = field(default_factory=dict)


@dataclass(slots=True)
class _SessionTools:
    lock: trio.Lock = field(default_factory=trio.Lock)
    unlisted: bool = False  # listing failed on this session: its calls go out unchecked
    unanswered: NotDelivered | None = None  # listing got no answer in time: nothing is sent on this session
    listed: _Listed | None = None


class ToolChecks:
    """The tools of every session of a run, and the check of each call (see the module docstring).
    ``on_warning`` hears each warning once."""

    def __init__(self, *, on_warning: Callable[[str], None] | None = None) -> None:
        self._sessions: weakref.WeakKeyDictionary[Session, _SessionTools] = weakref.WeakKeyDictionary()
        self._warned: set[tuple[str, str]] = set()
        self._on_warning = on_warning

    async def tools(self, server: str, session: Session) -> Mapping[str, Tool] | None:
        """The session's tools by name (listed now if they need to be); None when they cannot be listed."""
        listed = await self._listed(server, session)
        return listed.tools if listed is not None else None

    async def tool(self, server: str, session: Session, name: str) -> Tool | None:
        """The session's tool ``name``; None when it has none, or its tools cannot be listed."""
        tools = await self.tools(server, session)
        return tools.get(name) if tools is not None else None

    def known(self, session: Session, name: str) -> Tool | None:
        """The session's tool ``name`` as its current list says, without listing anything: None when it has no
        such tool, or its tools were not listed (or the list changed since)."""
        entry = self._sessions.get(session)
        listed = entry.listed if entry is not None else None
        if listed is None or session.listed_tools is not listed.source:
            return None
        return listed.tools.get(name)

    async def check(self, server: str, session: Session, name: str, args: Mapping[str, Any]) -> None:
        """Raise :class:`~runner.errors.InvalidCall` when ``session`` has no tool ``name`` or the tool's
        ``inputSchema`` refuses ``args``, ``NotDelivered`` when the server answers nothing to ``tools/list``;
        return when the call may be sent (or cannot be checked)."""
        listed = await self._listed(server, session)
        if listed is None:
            return
        tool = listed.tools.get(name)
        if tool is None:
            raise InvalidCall(unknown_tool(server, name, listed.tools))
        validator = self._validator(server, listed, tool)
        if validator is None:
            return
        try:
            problems = validator.problems(args)
        except argcheck.CannotCheck as exc:
            listed.validators[name] = None
            self._warn(server, name, f"{server}: tool {name}: {exc}; {_UNCHECKED}")
            return
        if problems:
            raise InvalidCall(
                f"{argcheck.describe_problems(problems)} (refused by the inputSchema of {name}; not sent)"
            )

    async def _listed(self, server: str, session: Session) -> _Listed | None:
        entry = self._sessions.get(session)
        if entry is None:
            entry = self._sessions[session] = _SessionTools()
        elif entry.listed is not None and session.listed_tools is entry.listed.source:
            return entry.listed  # the list is current: no lock, no wait (every call but the first comes here)
        async with entry.lock:
            if entry.unanswered is not None:
                raise entry.unanswered
            if entry.unlisted:
                return None
            try:
                # Cached by the session: a request only for a new session or after the list changed.
                source = await session.list_tools()
            except McpRunError as exc:
                self._not_listed(server, session, entry, exc)
                return None
            previous = entry.listed
            if previous is None or previous.source is not source:
                entry.listed = _relisted(previous, source)
            return entry.listed

    def _not_listed(self, server: str, session: Session, entry: _SessionTools, exc: McpRunError) -> None:
        """``tools/list`` failed. A broken connection: the call finds out, and a new session lists again. No
        answer to it: ``NotDelivered``, for this call and the session's next ones. Any other error: calls on
        this session go out unchecked (said once)."""
        if session.broken is not None:
            return
        if isinstance(exc, CallTimeout):
            entry.unanswered = NotDelivered(
                f"{server}: the server answered nothing to tools/list ({first_line(exc)}), though it "
                "answered initialize; the call was not sent"
            )
            raise entry.unanswered from exc
        entry.unlisted = True
        self._warn(
            server,
            "",
            f"{server}: could not list its tools ({first_line(exc)}); calls go out without checking their arguments",
        )

    def _validator(self, server: str, listed: _Listed, tool: Tool) -> argcheck.ArgsValidator | None:
        if tool.name in listed.validators:
            return listed.validators[tool.name]
        validator: argcheck.ArgsValidator | None
        try:
            validator = argcheck.compile_schema(tool.input_schema)
        except argcheck.InvalidSchema as exc:
            self._warn(server, tool.name, f"{server}: tool {tool.name}: {exc}; {_UNCHECKED}")
            validator = None
        listed.validators[tool.name] = validator
        return validator

    def _warn(self, server: str, tool: str, text: str) -> None:
        if (server, tool) in self._warned:
            return
        self._warned.add((server, tool))
        if self._on_warning is not None:
            self._on_warning(text)


def _relisted(previous: _Listed | None, source: list[Tool]) -> _Listed:
    """A new tool list, keeping the validators of ``previous`` whose tool's schema it did not change."""
    listed = _Listed(source, {t.name: t for t in source})
    if previous is None:
        return listed
    for name, validator in previous.validators.items():
        old, new = previous.tools.get(name), listed.tools.get(name)
        if old is not None and new is not None and old.input_schema == new.input_schema:
            listed.validators[name] = validator
    return listed


def unknown_tool(server: str, name: str, tools: Mapping[str, Tool]) -> str:
    """The message for a tool ``server`` does not list: a suggestion when one is close, else its tools."""
    return f"server {server} has no tool {name!r}; {_hint(name, tools)}"


def _hint(name: str, tools: Mapping[str, Tool]) -> str:
    suggestion = did_you_mean(name, tools)
    if suggestion is not None:
        return suggestion
    if not tools:
        return "it has no tools"
    names = sorted(tools)
    shown = ", ".join(names[:_SHOWN_TOOLS]) + (f", ... ({len(names)} in all)" if len(names) > _SHOWN_TOOLS else "")
    return f"it has: {shown}"
