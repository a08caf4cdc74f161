"""The committed JSON schema is the one the models generate, and it accepts the valid test workflows and the
examples of workflows/."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from runner.workflow.model import SCHEMA_PATH, schema_text

VALID = Path(__file__).parent / "workflows_valid"
EXAMPLES = Path(__file__).parents[1] / "workflows"


def test_committed_schema_is_fresh() -> None:
    committed = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
    assert committed == schema_text(), (
        f"{SCHEMA_PATH} is stale; regenerate it with: python scripts/gen_schema.py (or python -m runner.workflow.model)"
    )


def test_schema_is_valid_and_accepts_the_examples() -> None:
    schema = json.loads(schema_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    paths = sorted(VALID.glob("*.yaml")) + sorted(EXAMPLES.glob("*.yaml"))
    assert len(paths) > 3
    for path in paths:
        validator.validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def test_schema_refuses_unknown_keys_and_bad_ids() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    base = {"version": 1, "servers": {"fs": {"command": ["x"]}}, "steps": {"a": {"server": "fs", "tool": "t"}}}
    assert validator.is_valid(base)
    assert not validator.is_valid({**base, "stepz": {}})
    assert not validator.is_valid({**base, "steps": {"a-b": {"server": "fs", "tool": "t"}}})
    assert not validator.is_valid({**base, "steps": {"a": {"server": "fs", "tol": "t"}}})
    assert not validator.is_valid({**base, "servers": {"fs": {"command": ["x"], "url": "http://h"}}})
    assert not validator.is_valid({**base, "steps": {"a": {"server": "fs", "tool": "t", "timeout": "10 minutes"}}})
