"""What changed between an open run on Temporal and the workflow file now, by the local engine's rules.

A run's memo keeps what a resume compares (:func:`memo_of`): the workflow file's hash, the step fingerprints
and a digest of its public inputs. ``FILE --resume --engine temporal`` compares them with the file and inputs
of the command (:func:`changes_since`), as a local resume compares them with the journal: the same words, and
an open run of a changed definition is not resumed as is. On Temporal the run goes on with the definition it
started with (its text travelled with it), so ``--allow-changed`` cannot apply a change there yet.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from runner.engine.core.resume import changed_steps
from runner.temporal.spec import RunSpec

__all__ = ["changes_since", "memo_of"]


def _digest(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:32]


def memo_of(spec: RunSpec) -> dict[str, Any]:
    """The memo a run starts with: its file and run id (to find it), and what a resume compares."""
    return {
        "workflow": spec.workflow,
        "run_id": spec.run_id,
        "workflow_hash": spec.workflow_hash,
        "fingerprints": spec.fingerprints,
        "inputs_digest": _digest(spec.inputs),
    }


def changes_since(memo: dict[str, Any], spec: RunSpec) -> list[str]:
    """What differs between the run of ``memo`` and ``spec`` (the file and inputs now), in the local words;
    nothing for a run started before its memo kept them."""
    changes: list[str] = []
    if isinstance(memo.get("workflow_hash"), str) and memo["workflow_hash"] != spec.workflow_hash:
        changes.append("the workflow file changed since the run started")
    fingerprints = memo.get("fingerprints")
    if isinstance(fingerprints, dict):
        changed = changed_steps(fingerprints, spec.fingerprints)
        if changed:
            changes.append("steps whose definition or inputs changed: " + ", ".join(sorted(changed)))
    if isinstance(memo.get("inputs_digest"), str) and memo["inputs_digest"] != _digest(spec.inputs):
        changes.append("the inputs changed since the run started")
    return changes
