"""Snapshot files in this folder: recorded journals in (``*.jsonl``, see ``record.py``), expected text out.

``UPDATE_SNAPSHOTS=1 pytest`` rewrites the expected files instead of comparing (then read the diff).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from runner.engine.core.events import Entry, decode

SNAPSHOTS = Path(__file__).parent
JOURNALS = ("succeeded", "failed", "fanout", "interrupted", "in_doubt")


def events(name: str) -> list[dict[str, Any]]:
    """A recorded journal's lines, as dicts."""
    return [json.loads(line) for line in (SNAPSHOTS / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def entries(name: str) -> list[Entry]:
    """A recorded journal's lines, decoded as a journal reader decodes them."""
    return [decode(event) for event in events(name)]


def check(actual: str, filename: str) -> None:
    path = SNAPSHOTS / filename
    if os.environ.get("UPDATE_SNAPSHOTS"):
        path.write_text(actual)
        return
    assert path.exists(), f"no snapshot {path}; run with UPDATE_SNAPSHOTS=1 to record it"
    expected = path.read_text()
    assert actual == expected, f"{filename} differs from the snapshot (UPDATE_SNAPSHOTS=1 to accept)"
