"""How mcp-run words a count: ``1 step``, ``2 steps``, ``1 call``, ``0 calls``."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and ``noun``, in the plural unless ``count`` is 1 (``nouns``, else ``noun`` + "s")."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"
