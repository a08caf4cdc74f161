"""What a resume compares: each step's fingerprint, and the workflow file's hash.

A fingerprint hashes what a step does (its definition, its server's, the non-secret inputs) and its
dependencies' fingerprints, so an edit upstream changes every step downstream of it. Pure but for
:func:`workflow_hash`, which reads the file it hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.jsontext import utf8
from runner.workflow.model import Server
from runner.workflow.plan import Plan
from runner.workflow.template import canonical_json

__all__ = ["fingerprints", "workflow_hash"]


def workflow_hash(path: Path) -> str:
    """The SHA-256 of the workflow file's bytes (a resume says when the file changed)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _server_dump_exclude(server: Server) -> set[str]:
    """Fields left out of a fingerprint: ``max_concurrency`` and ``rate`` (how fast calls go), ``transport``,
    ``tasks`` (a call made as a task or not), ``protocol`` (the revision spoken) and ``auth`` (how tokens are
    obtained) do not change what a step does; a field added later (``env_passthrough``, ``elicitation``,
    ``roots``), when unset, must leave the fingerprints of runs started before it as they were."""
    added_later = ("env_passthrough", "elicitation", "roots")
    left_out = {"max_concurrency", "rate", "transport", "tasks", "protocol", "auth"}
    return left_out | {name for name in added_later if getattr(server, name) is None}


_STEP_EXCLUDE: set[str] = {"cache", "cache_key", "reconcile"}


def fingerprints(plan: Plan, inputs: Mapping[str, Any]) -> dict[str, str]:
    """step -> hash of its definition, its server's definition, the non-secret inputs and its dependencies'
    fingerprints (so a change flows downstream). Linear in steps: a step hashes its dependencies' fingerprints,
    not their definitions, so a chain of 20,000 steps hashes 20,000 definitions, not 200 million."""
    public_inputs = {name: value for name, value in inputs.items() if not plan.workflow.inputs[name].secret}
    inputs_text = utf8(canonical_json(public_inputs))
    servers = {
        name: utf8(canonical_json(ps.server.model_dump(mode="json", exclude=_server_dump_exclude(ps.server))))
        for name, ps in plan.servers.items()
    }
    out: dict[str, str] = {}
    for sid in plan.order:
        ps = plan.steps[sid]
        h = hashlib.sha256()
        # A cache says where a result may come from and reconcile how a doubt is settled, not what the call
        # does: adding either changes no fingerprint.
        h.update(utf8(canonical_json(ps.step.model_dump(mode="json", by_alias=True, exclude=_STEP_EXCLUDE))))
        h.update(servers[ps.server])  # each server's text once, not once per step
        h.update(inputs_text)
        for dep in ps.dependencies:
            h.update(out[dep].encode())
        out[sid] = h.hexdigest()[:16]
    return out
