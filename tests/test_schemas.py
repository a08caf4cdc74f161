"""The --json summary and journal lines validate against the committed JSON Schemas, which are fresh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import trio

from runner.engine.core.outcome import summary
from runner.schemas import JOURNAL_SCHEMA_PATH, SUMMARY_SCHEMA_PATH, write_schemas
from tests.harness import CHAIN, Harness, echo_tools, plan_of, run_plan

SUMMARY_SCHEMA = json.loads(Path(SUMMARY_SCHEMA_PATH).read_text())
EVENT_SCHEMA = json.loads(Path(JOURNAL_SCHEMA_PATH).read_text())


def test_committed_schemas_are_fresh() -> None:
    assert write_schemas(check=True) == [], "run `python -m runner.schemas` and commit the result"


async def test_real_summary_and_events_validate(autojump_clock: trio.abc.Clock) -> None:
    events: list[dict[str, Any]] = []
    plan = plan_of(CHAIN)
    outcome = await run_plan(plan, Harness({"s": echo_tools}), events=events)
    jsonschema.validate(summary(plan, outcome, run_id=None, duration=1.5), SUMMARY_SCHEMA)
    validator = jsonschema.Draft202012Validator(EVENT_SCHEMA)
    for event in events:
        errors = list(validator.iter_errors(event))
        assert not errors, (event, errors[0].message)
    assert {e["type"] for e in events} >= {"session_opened", "step_started", "item_dispatched", "item_succeeded"}
