"""The test doubles: fake MCP servers.

- ``server.py``: a scripted MCP server over the in-memory transport (:mod:`runner.testing.memory`), built on our
  own JSON-RPC core; tests import :class:`tests.fakes.server.FakeServer` and give it tool handlers.
- ``stdio_*.py`` and ``mcp_modes.py``: standalone scripts (standard library only) run as child processes, some
  misbehaving on purpose; ``fake_command`` turns one into an argv list.

Real peers (the official SDK's server, server-everything) are not fakes: ``tests/peers/`` and
``tests/integration/peers.py`` start them for the integration and end-to-end tests."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["fake_command"]

FAKES = Path(__file__).resolve().parent


def fake_command(name: str, *args: str) -> list[str]:
    """``[python, tests/fakes/<name>.py, *args]``, with the interpreter that runs the tests."""
    path = FAKES / f"{name}.py"
    assert path.is_file(), path
    return [sys.executable, str(path), *args]
