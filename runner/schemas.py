"""JSON Schemas of what mcp-run writes for machines: the ``--json`` run summary, the ``--json`` error,
``validate --json``'s report, and journal events.

The journal's schema is generated from the event classes themselves (:mod:`runner.engine.core.events`), with
``seq`` and ``ts`` added to each; the summary's from the model here, whose vocabularies are the events'
enums. Tests validate real output against both (``schemas/summary.schema.json`` and
``schemas/journal-event.schema.json``, ``schemas/error.schema.json``, ``schemas/validate.schema.json``) and
check they are fresh. Regenerate with
``python -m runner.schemas`` (``--check`` only compares).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.engine.core.events import event_adapter
from runner.engine.core.vocabulary import FailureKind, RunStatus, SkipCause, StepStatus

__all__ = [
    "ERROR_SCHEMA_PATH",
    "JOURNAL_SCHEMA_PATH",
    "SUMMARY_SCHEMA_PATH",
    "VALIDATE_SCHEMA_PATH",
    "ErrorReport",
    "Problem",
    "ValidateReport",
    "error_schema",
    "journal_event_schema",
    "summary_schema",
    "validate_schema",
    "write_schemas",
]

ROOT = Path(__file__).resolve().parents[1]
SUMMARY_SCHEMA_PATH = ROOT / "schemas" / "summary.schema.json"
JOURNAL_SCHEMA_PATH = ROOT / "schemas" / "journal-event.schema.json"
ERROR_SCHEMA_PATH = ROOT / "schemas" / "error.schema.json"
VALIDATE_SCHEMA_PATH = ROOT / "schemas" / "validate.schema.json"


class StepSummary(BaseModel):
    status: StepStatus
    reason: str | None = Field(None, description="Why a step was skipped or failed as a whole.")
    cause: SkipCause | None = Field(
        None,
        description="Why a skipped step was skipped: `if-false` (its if), `dependency-skipped` (a dependency "
        "was skipped; nothing failed), `failure` (something failed), `unfinished` (a dependency has no "
        "definite outcome yet, or the run was interrupted: a resume decides).",
    )
    total: int = Field(description="Items (1 for a plain step).")
    succeeded: int
    failed: int
    in_doubt: int = Field(description="Calls whose outcome is unknown.")
    skipped: int
    reused: int = Field(
        description="Items whose result came from the journal of an earlier attempt (or, with cache:, of an "
        "earlier run)."
    )
    reconciled: int = Field(
        0, description="Succeeded items its reconcile tool settled: asked, it said their call happened."
    )


class Failure(BaseModel):
    step: str
    item: str | None = Field(description="The item's key (empty or null for a plain step).")
    index: int | None
    kind: FailureKind
    error: str
    dispatched_at: str | None = None


class OutputFailure(BaseModel):
    output: str = Field(description="The output's name (it is absent from `outputs`).")
    error: str = Field(description="Why it could not be rendered, with the expression's file:line:column.")
    file: str | None = None
    line: int | None = Field(None, description="Where the output sits in the workflow file.")
    column: int | None = None


class Summary(BaseModel):
    """The one JSON object ``mcp-run ... --json`` prints at the end of a run."""

    model_config = ConfigDict(title="mcp-run run summary")

    version: Literal[1]
    run_id: str | None = Field(description="Null with --no-journal.")
    workflow: str | None
    status: RunStatus
    exit_code: int
    duration_s: float
    steps: dict[str, StepSummary]
    outputs: dict[str, Any]
    failed: list[Failure]
    in_doubt: list[Failure]
    stray: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Per server, what it sent that matched nothing and was ignored: `invalid_lines` (not "
        "JSON-RPC) and `unmatched_responses` (to ids never sent). Only servers with something to report.",
    )
    throttled: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per server that refused calls for now (HTTP 429, or 503 before running them): `refused` "
        "(such answers), `pauses` and `paused_s` (every call to it waited), `concurrency` (the calls it ran at "
        "once at the end, lowered from max_concurrency). Only servers that did.",
    )
    outputs_failed: list[OutputFailure] = Field(
        default_factory=list,
        description="The outputs that could not be rendered after the run; the others are in `outputs`. Any "
        "makes the run fail (exit 1).",
    )
    output_file_error: str | None = Field(
        None,
        description="Why --output could not be written at the end (the outputs are in `outputs`, and in the "
        "journal); the exit code is then at least 1.",
    )


class Problem(BaseModel):
    """One problem with the input, located as precisely as the input allows."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    path: str | None = Field(None, description="The field, as `steps.convert.args.path`.")
    suggestion: str | None = None


class ErrorReport(BaseModel):
    """The one JSON object a command given ``--json`` prints on stdout when it stops without a result of its
    own: an error (bad input, a refusal, a server that could not be reached), or nothing to do."""

    model_config = ConfigDict(title="mcp-run error (--json)")

    version: Literal[1]
    status: Literal["error", "nothing-to-do"]
    exit_code: int
    message: str = Field(description="What stderr says, whole (it may span lines).")
    problems: list[Problem] = Field(
        default_factory=list, description="For an invalid workflow or input: each problem, in file order."
    )


class ValidateReport(BaseModel):
    """What ``mcp-run validate --json`` prints on stdout: whether the workflow is valid and, when it is not,
    every problem found (the exit code is 2 then, as without ``--json``)."""

    model_config = ConfigDict(title="mcp-run validate report (--json)")

    version: Literal[1]
    ok: bool
    file: str = Field(description="The workflow as the command line named it; empty when it named none.")
    errors: list[Problem] = Field(default_factory=list, description="Each problem, in file order; empty when ok.")
    warnings: list[str] = Field(
        default_factory=list, description="What may fail when run here (a stdio server's program not found)."
    )
    steps: int | None = Field(default=None, description="When ok: the number of steps (and below, of layers, ...).")
    layers: int | None = None
    servers: int | None = None
    fan_outs: int | None = None


def summary_schema() -> dict[str, Any]:
    schema = Summary.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def error_schema() -> dict[str, Any]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **ErrorReport.model_json_schema()}


def validate_schema() -> dict[str, Any]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **ValidateReport.model_json_schema()}


def journal_event_schema() -> dict[str, Any]:
    schema = event_adapter().json_schema()
    stamp = {
        "seq": {"type": "integer", "minimum": 1, "description": "1, 2, 3, ... over the life of the run."},
        "ts": {"type": "string", "description": "UTC time, ISO 8601 with milliseconds."},
    }
    for definition in schema.get("$defs", {}).values():
        properties = definition.get("properties", {})
        if "type" in properties:  # an event
            definition["properties"] = {**stamp, **properties}
            definition["required"] = ["seq", "ts", *definition.get("required", [])]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "mcp-run journal event (one line of journal.jsonl)",
        **schema,
    }


def _text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write_schemas(*, check: bool = False) -> list[Path]:
    """Write (or with ``check`` only compare) the schema files; returns those that were stale."""
    stale = []
    for path, schema in (
        (SUMMARY_SCHEMA_PATH, summary_schema()),
        (JOURNAL_SCHEMA_PATH, journal_event_schema()),
        (ERROR_SCHEMA_PATH, error_schema()),
        (VALIDATE_SCHEMA_PATH, validate_schema()),
    ):
        text = _text(schema)
        if not path.exists() or path.read_text() != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    return stale


if __name__ == "__main__":
    stale = write_schemas(check="--check" in sys.argv)
    for path in stale:
        print(f"{'stale' if '--check' in sys.argv else 'wrote'}: {path}")
    raise SystemExit(1 if stale and "--check" in sys.argv else 0)
