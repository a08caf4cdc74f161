"""Fan-out items' identities: what the journal calls an item, and the label every view shows for it.

An item's key is the step's ``key`` template when it has one. Without one, the key is the item itself when
the item is a short scalar (a string of at most :data:`LABEL_LIMIT` printable characters without
surrounding spaces, a number, ``true`` or ``false``), else ``#`` and the first :data:`HASH_DIGITS` hex
digits of the SHA-256 of its canonical JSON (``#3f2a9c01d4e7b2a0``). The live view, the summary, ``show`` and
``--json`` all print this key, so an item reads the same everywhere.

Keys are how a resume finds what an earlier attempt did, so they never change for a run: journals of
format 1 (``run_started.journal`` absent or 1) keyed every item without a ``key`` by its full SHA-256, and
a resume of one keeps doing so (``full_hash=True``), so no item is called again.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Final

from runner.jsontext import utf8
from runner.workflow.template import canonical_json

__all__ = ["HASH_DIGITS", "LABEL_LIMIT", "default_key", "scalar_label"]

LABEL_LIMIT: Final = 40
"""The longest string item that is its own key."""

HASH_DIGITS: Final = 16
"""Hex digits of the SHA-256 in the key of an item that is not a short scalar. With 64 bits, two of a
million items share a key by chance with odds of about 1 in 40 million; the step then fails with "the same
key", never silently."""


def default_key(item: Any, *, full_hash: bool = False) -> str:
    """The key of a fan-out item when its step has no ``key`` template (see the module docstring). Hashed only
    when the key is a hash."""
    if not full_hash:
        label = scalar_label(item)
        if label is not None:
            return label
    digest = hashlib.sha256(utf8(canonical_json(item))).hexdigest()
    return digest if full_hash else "#" + digest[:HASH_DIGITS]


def scalar_label(item: Any) -> str | None:
    """The item as its own label, or None when it is not a short scalar."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        text = str(item)
        return text if len(text) <= LABEL_LIMIT else None
    if isinstance(item, float):
        return canonical_json(item) if math.isfinite(item) else None
    return _string_label(item) if isinstance(item, str) else None


def _string_label(item: str) -> str | None:
    """A short printable string without surrounding spaces labels itself (unless it starts as a hash does)."""
    if 0 < len(item) <= LABEL_LIMIT and item.isprintable() and item == item.strip():
        return None if item.startswith("#") else item
    return None
