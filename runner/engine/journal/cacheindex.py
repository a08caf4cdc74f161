"""The cache index of a run (:class:`~runner.engine.core.cache.CacheIndex`), built once when it starts from the
journals of the workflow's earlier runs.

Only ``item_succeeded`` records that carry a ``cache`` digest and were themselves calls (no ``reused_from``:
a hit's age is its first call's) are taken, and only those recorded within ``horizon`` seconds of ``now`` (the
longest ``cache:`` of the plan): a journal last written before that is not even opened, and a line that
cannot hold such a record is not decoded. A journal that is damaged part-way gives what it holds before the
damage (each result line stands on its own); one that cannot be read gives nothing. Results are decoded with
the run's masker (``unmask``), as a resume reads its own journal back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from runner.engine.core.cache import CacheHit, CacheIndex, entry_time
from runner.engine.core.events import JOURNAL_FORMAT, ItemSucceeded, RunStarted
from runner.engine.journal.reader import JournalCorrupt, decode_line
from runner.engine.journal.rundir import RunDir
from runner.masking import Masker

__all__ = ["cache_index"]

_SUCCEEDED: Final = b'"type":"item_succeeded"'
_CACHED: Final = b'"cache":'


def cache_index(run_dirs: Iterable[RunDir], *, now: float, horizon: float, unmask: Masker | None = None) -> CacheIndex:
    """The results the runs of ``run_dirs`` left for cached steps, recorded within ``horizon`` seconds of
    ``now`` (see the module docstring)."""
    index = CacheIndex(now)
    for run_dir in run_dirs:
        try:
            if run_dir.journal.stat().st_mtime < now - horizon:
                continue  # nothing in it is recent enough
            _read_into(index, run_dir, now=now, horizon=horizon, unmask=unmask)
        except (OSError, JournalCorrupt):
            continue
    return index


def _read_into(index: CacheIndex, run_dir: RunDir, *, now: float, horizon: float, unmask: Masker | None) -> None:
    source = str(run_dir.journal)
    journal = JOURNAL_FORMAT
    with run_dir.journal.open("rb") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                return  # a torn tail
            if line_no == 1:
                first = decode_line(line, source=source, line_no=1, unmask=unmask)
                if isinstance(first.event, RunStarted):
                    journal = first.event.journal or 1
                continue
            if _SUCCEEDED not in line or _CACHED not in line:
                continue
            entry = decode_line(line, source=source, line_no=line_no, unmask=unmask, journal=journal)
            event = entry.event
            if not isinstance(event, ItemSucceeded) or event.cache is None or event.reused_from is not None:
                continue
            at = entry_time(entry.ts)
            if at is None or now - at > horizon:
                continue
            index.offer(event.cache, CacheHit(run_dir.run_id, event.result, at))
