"""Fake MCP servers. ``stdio_*.py`` are standalone scripts (standard library only) that misbehave on purpose;
``fake_command`` turns one into an argv list."""

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
