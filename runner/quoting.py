"""Quoting a value into a message: mask before you cut.

An error that quotes a value (``abs() ... found a string ('sk-live-...')``) shortens it; a secret cut to its
first characters is no longer the secret, and no masker finds it in the message afterwards. So the value is
masked first, whole, then cut: :func:`quote` (and :func:`cut`) apply the masking of the run in progress, which
the engine installs for as long as it renders templates and checks arguments (:func:`masking`). The pure core
quotes through this module and never sees the masker itself (it may not import the engine).

A whole value is masked, so even a secret too short to be masked inside text (``SHORT``) is masked here when
it is all the value quoted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

__all__ = ["QUOTE_CHARS", "cut", "masked", "masking", "quote"]

QUOTE_CHARS: Final = 40
"""How much of a value a message quotes (``...`` included)."""

_MASK: ContextVar[Callable[[str], str] | None] = ContextVar("mcp_run_quote_mask", default=None)


@contextmanager
def masking(mask: Callable[[str], str]) -> Iterator[None]:
    """While it lasts (in this task, and in the tasks it starts: trio copies the context), :func:`quote` and
    :func:`cut` mask each value with ``mask`` before they shorten it."""
    token = _MASK.set(mask)
    try:
        yield
    finally:
        _MASK.reset(token)


def masked(text: str) -> str:
    """``text`` masked by the run's masking, when one is installed (before a message is cut in any way: to
    its first line, say)."""
    mask = _MASK.get()
    return mask(text) if mask is not None else text


def cut(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` masked (when a run's masking is installed), then cut to ``limit`` characters with ``...``."""
    text = masked(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` as a message quotes it: masked, cut (:func:`cut`), in Python's quotes."""
    return repr(cut(text, limit))
