"""Characters a server's settings cannot carry, found by ``validate`` rather than when the server starts.

An argument, a path or an environment variable is a C string for the operating system: a NUL character
(``"\\0"`` or ``"\\x00"`` in a double-quoted YAML string) cannot be in one, and an environment variable's
name cannot hold ``=`` either. An HTTP header cannot hold a line break or a NUL, its value is ASCII (HTTP
sends header bytes, and mcp-run sends no other encoding), and its name is a token (letters, digits and
``!#$%&'*+-.^_`|~``). Template parts are checked as written; what a template renders to is checked before the
run starts (:func:`header_value_problem`, used by :mod:`runner.workflow.servers`).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from runner.protocol.headers import header_value_problem
from runner.workflow.model import Server
from runner.workflow.positions import Loc

__all__ = ["Problem", "ascii_hint", "header_value_problem", "server_problems"]

_HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_EXPRESSION: Final = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)  # a template's expression: checked once rendered
_ASCII_HINT: Final = (
    "HTTP header values are ASCII: percent-encode or base64 the text as the server expects it, or send it in "
    "the tool's arguments instead"
)
_NUL_HINT: Final = 'remove the "\\0" or "\\x00" escape'


class Problem(NamedTuple):
    """One setting that cannot work: its path under the server, the message, a hint, key or value."""

    loc: Loc
    message: str
    suggestion: str | None = None
    at: str = "value"


def server_problems(server: Server) -> list[Problem]:
    """Every literal setting of ``server`` that the operating system or HTTP could not carry."""
    found = [
        Problem(("command", n), "a command-line argument cannot hold a NUL character", _NUL_HINT)
        for n, arg in enumerate(server.command or ())
        if "\0" in arg
    ]
    if server.cwd is not None and "\0" in server.cwd:
        found.append(Problem(("cwd",), "a path cannot hold a NUL character", _NUL_HINT))
    for name, value in (server.env or {}).items():
        found.extend(_env_problems(name, value))
    for name, value in (server.headers or {}).items():
        found.extend(_header_problems(name, value))
    return found


def _env_problems(name: str, value: str) -> list[Problem]:
    found: list[Problem] = []
    if not name or "=" in name or "\0" in name:
        reason = "it is empty" if not name else "it holds '='" if "=" in name else "it holds a NUL character"
        found.append(Problem(("env", name), f"{name!r} cannot be an environment variable's name: {reason}", at="key"))
    if "\0" in value:
        found.append(Problem(("env", name), "an environment variable cannot hold a NUL character", _NUL_HINT))
    return found


def _header_problems(name: str, value: str) -> list[Problem]:
    found: list[Problem] = []
    if not _HEADER_NAME.fullmatch(name):
        found.append(
            Problem(
                ("headers", name),
                f"{name!r} cannot be an HTTP header's name: letters, digits and !#$%&'*+-.^_`|~ only",
                at="key",
            )
        )
    # (each expression stands in as ASCII of its length: the position named is the character's in the text)
    literal = _EXPRESSION.sub(lambda m: "x" * len(m.group()), value) if "${{" in value else value
    problem = header_value_problem(name, literal, quote=True)
    if problem is not None:
        found.append(Problem(("headers", name), problem, _ASCII_HINT))
    if any(char in value for char in "\0\r\n"):
        found.append(
            Problem(
                ("headers", name),
                "an HTTP header's value cannot hold a line break or a NUL character",
                "write the value on one line (a YAML block scalar, | or >, ends with a line break)",
            )
        )
    return found


def ascii_hint() -> str:
    """The hint that goes with :func:`header_value_problem`."""
    return _ASCII_HINT
