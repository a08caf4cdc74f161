"""What a run on Temporal is given: the workflow's text and path, its public inputs, and the options. The
workflow and every activity rebuild the same :class:`~runner.workflow.plan.Plan` from it with the pure
core (parsing and planning read no clock, no environment, no file but the text given)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from runner.engine.core.cache import CacheHit, CacheIndex
from runner.masking import escape_value, placeholder
from runner.workflow.loader import parse_workflow, validate
from runner.workflow.plan import Plan

__all__ = [
    "BATCH_SIZE",
    "CHILD_ITEMS",
    "MAX_BATCH",
    "MAX_PENDING",
    "QUERY_LIMIT",
    "WORKFLOW_NAME",
    "RunSpec",
    "batch_size_for",
    "build_plan_of",
    "encoded_inputs",
    "env_placeholders",
]

WORKFLOW_NAME: Final = "mcp-run"  # the run's workflow type (runner.temporal.dag); the CLI names it without loading it
QUERY_LIMIT: Final = 5_000  # events per answer of the run's events query: a shorter answer holds all there is so far
BATCH_SIZE: Final = 100  # items per call activity at least, when the run sizes its batches
MAX_BATCH: Final = 500  # items per call activity at most, when the run sizes its batches
BATCHES: Final = 4  # batches a fan-out is cut into, when that leaves them between BATCH_SIZE and MAX_BATCH
MAX_PENDING: Final = 50  # call activities pending at once per workflow (Temporal struggles past ~100)
CHILD_ITEMS: Final = 2_000  # a fan-out of more calls runs as child workflows of at most this many each
CHILD_ITEMS_VARIABLE: Final = "MCP_RUN_TEMPORAL_CHILD_ITEMS"  # overrides CHILD_ITEMS where a run starts (tests)


def _child_items() -> int:
    """CHILD_ITEMS, or the value of MCP_RUN_TEMPORAL_CHILD_ITEMS where the run is started (read once, into the
    run's definition: the workflow itself reads no environment)."""
    value = os.environ.get(CHILD_ITEMS_VARIABLE, "")
    return int(value) if value.isdigit() and int(value) > 0 else CHILD_ITEMS


@dataclass(frozen=True)
class RunSpec:
    """A run's definition, as the workflow's argument (JSON). ``inputs`` are the public values as typed by
    the workflow; ``env`` names the environment variables the workflow reads (their values never travel:
    templates see ``***env.NAME***`` and each activity puts the worker's values back)."""

    run_id: str
    workflow: str
    text: str
    inputs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, bool] = field(default_factory=dict)  # name -> set where the run was started
    fingerprints: dict[str, str] = field(default_factory=dict)
    workflow_hash: str = ""
    batch_size: int = 0  # items per call activity; 0: sized by each fan-out (batch_size_for)
    max_pending: int = MAX_PENDING
    heartbeat_timeout: float = 10.0
    max_attempts: int = 5
    server_log_level: str | None = "info"  # asked of servers; messages at or above it go to the worker's stderr
    child_items: int = field(default_factory=_child_items)  # calls per child workflow (runner.temporal.fanout)
    # Results earlier runs left for steps with `cache:` ({"digest", "run_id", "result", "at"}), as of `cache_now`
    # (seconds since the epoch): the index the step machine looks calls up in (runner.engine.core.cache).
    cache: list[dict[str, Any]] = field(default_factory=list)
    cache_now: float = 0.0
    traceparent: str | None = None  # the run span of the client that started it traced (run_started journals it)

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSpec:
        known = {f for f in cls.__dataclass_fields__}
        given = {k: v for k, v in data.items() if k in known}
        given.setdefault("child_items", CHILD_ITEMS)  # a definition from before child workflows: never the environment
        return cls(**given)

    def cache_index(self) -> CacheIndex:
        """The run's :class:`~runner.engine.core.cache.CacheIndex`, from ``cache`` (deterministic: its time is
        the definition's)."""
        index = CacheIndex(self.cache_now)
        for hit in self.cache:
            index.offer(str(hit["digest"]), CacheHit(str(hit["run_id"]), dict(hit["result"]), float(hit["at"])))
        return index

    @cached_property
    def plan_key(self) -> str:
        """Identifies the plan (text, path, inputs): the worker's cache of plans and sessions is keyed by it."""
        body = json.dumps([self.workflow, self.text, self.inputs], sort_keys=True, default=str)
        return hashlib.sha256(body.encode()).hexdigest()[:24]


def batch_size_for(spec: RunSpec, calls: int, max_concurrency: int) -> int:
    """Items per call activity of a step of ``calls`` calls on a server with ``max_concurrency``: the run's
    ``batch_size`` when given (``--batch-size``; a definition from before sized batches has 100), else sized by
    the fan-out. Each activity costs the Temporal server and the worker a schedule, a start, a completion and a
    workflow task, and a heartbeat per group of dispatch markers; fewer, larger batches group more markers per
    heartbeat. So a fan-out is cut into ``BATCHES``, of ``BATCH_SIZE`` items at least (and four times the
    server's ``max_concurrency``, so one batch can keep its calls in flight) and ``MAX_BATCH`` at most (what a
    heartbeat carries, what a lost worker's retry covers, and several batches for several workers)."""
    if spec.batch_size > 0:
        return spec.batch_size
    wanted = max(-(-calls // BATCHES), BATCH_SIZE, 4 * max_concurrency)
    return max(1, min(wanted, MAX_BATCH))


def build_plan_of(spec: RunSpec) -> Plan:
    """The plan of ``spec`` (the same everywhere: deterministic)."""
    loaded = parse_workflow(spec.text, file=spec.workflow)
    return validate(loaded, require_inputs=True, inputs_file=spec.inputs or None)


def env_placeholders(spec: RunSpec) -> dict[str, str | None]:
    """The ``env`` templates see in the workflow: a placeholder for each variable set, None for the others.
    What the workflow renders is encoded text (:mod:`runner.masking`): results are encoded by the
    activity that got them, inputs by :func:`encoded_inputs`, so only these placeholders (and those of
    secrets masked in results) read back as values where an activity decodes its arguments."""
    return {name: placeholder(f"env.{name}") if is_set else None for name, is_set in sorted(spec.env.items())}


def encoded_inputs(plan: Plan) -> dict[str, Any]:
    """The inputs as the workflow's templates see them: encoded (a ``***`` in them escaped), so that an input
    that looks like a placeholder stays text when an activity decodes its arguments."""
    return dict(escape_value(dict(plan.input_values or {})))
