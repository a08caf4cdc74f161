"""A step's cache (``cache: 7d``): the key of a call, and the index of the results earlier runs left.

A call's key is the SHA-256 of the canonical JSON of its server, tool, rendered arguments and ``cache_key``
(:func:`cache_digest`). Only the digest is journaled (``item_succeeded.cache``), never the arguments: a step
whose arguments read a secret may be cached, and its journal holds neither the secret nor anything but a hash
of it. The :class:`CacheIndex` is built once, when a run starts, from the journals of the workflow's earlier runs
(:func:`runner.engine.journal.cacheindex.cache_index`); a step looks each call up in it
(:meth:`runner.engine.core.steps.StepMachine.cached`), whichever executor runs it.

Pure: the index is given the time it is measured from (``now``, seconds since the epoch), so a test chooses it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runner.jsontext import utf8
from runner.workflow.template import canonical_json

__all__ = ["CacheHit", "CacheIndex", "CacheLookup", "cache_digest", "entry_time"]


def cache_digest(server: str, tool: str, args: Any, extra: Any = None) -> str:
    """The key of a call: the SHA-256 (hex) of the canonical JSON of ``[server, tool, args, extra]``."""
    return hashlib.sha256(utf8(canonical_json([server, tool, args, extra]))).hexdigest()


def entry_time(ts: str) -> float | None:
    """A journal entry's ``ts`` (``2026-12-03T11:47:07.123Z``) as seconds since the epoch; None when unreadable."""
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class CacheHit:
    """A result an earlier run journaled: the run (``run_id``), the result, and when it was recorded (``at``)."""

    run_id: str
    result: dict[str, Any]
    at: float


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """A call's key (``digest``) and what the index holds for it (``hit``; None: a miss, the call is made)."""

    digest: str
    hit: CacheHit | None


class CacheIndex:
    """The results of earlier runs by key, as of ``now``; the newest result of a key is kept."""

    def __init__(self, now: float) -> None:
        self.now = now
        self._hits: dict[str, CacheHit] = {}

    def __len__(self) -> int:
        return len(self._hits)

    def offer(self, digest: str, hit: CacheHit) -> None:
        """A result an earlier run left for ``digest`` (kept when it is the newest seen)."""
        known = self._hits.get(digest)
        if known is None or hit.at > known.at:
            self._hits[digest] = hit

    def find(self, digest: str, max_age: float) -> CacheHit | None:
        """The result of ``digest`` recorded at most ``max_age`` seconds before ``now``, if any."""
        hit = self._hits.get(digest)
        if hit is None or self.now - hit.at > max_age:
            return None
        return hit
