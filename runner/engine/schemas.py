"""JSON Schemas of what mcp-run writes for machines: the ``--json`` run summary and journal events.

The models here document the formats; the code that writes them builds plain dicts on the hot path, and
tests validate real output against the generated schemas (``schemas/summary.schema.json`` and
``schemas/journal-event.schema.json``). Regenerate with ``python -m runner.engine.schemas`` (``--check`` only
compares).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from runner.engine.journal import FailureKind

__all__ = ["JOURNAL_SCHEMA_PATH", "SUMMARY_SCHEMA_PATH", "journal_event_schema", "summary_schema", "write_schemas"]

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_SCHEMA_PATH = ROOT / "schemas" / "summary.schema.json"
JOURNAL_SCHEMA_PATH = ROOT / "schemas" / "journal-event.schema.json"

RunStatus = Literal["succeeded", "failed", "in-doubt", "incomplete", "interrupted"]
StepStatusName = Literal["succeeded", "failed", "incomplete", "skipped", "interrupted", "not-run", "pending", "running"]
Kind = FailureKind


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class StepSummary(BaseModel):
    status: StepStatusName
    reason: str | None = Field(None, description="Why a step was skipped or failed as a whole.")
    total: int = Field(description="Items (1 for a plain step).")
    succeeded: int
    failed: int
    in_doubt: int = Field(description="Calls whose outcome is unknown.")
    skipped: int
    reused: int = Field(description="Items whose result came from the journal of an earlier attempt.")


class Failure(BaseModel):
    step: str
    item: str | None = Field(description="The item's key (empty or null for a plain step).")
    index: int | None
    kind: Kind
    error: str
    dispatched_at: str | None = None


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


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")

    seq: int = Field(ge=1, description="1, 2, 3, ... over the life of the run, resumes included.")
    ts: str = Field(description="UTC time, ISO 8601 with milliseconds.")


class RunStarted(_Event):
    type: Literal["run_started"]
    run_id: str | None
    workflow: str | None
    workflow_hash: str | None
    inputs: dict[str, Any] = Field(description="Resolved inputs; secret ones are placeholders.")
    fingerprints: dict[str, str]
    env: list[str] = Field(description="Names of the environment variables the run read (never values).")
    pid: int


class RunResumed(_Event):
    type: Literal["run_resumed"]
    pid: int
    fingerprints: dict[str, str]
    allow_changed: bool
    retry_failed: bool | None = Field(None, description="True when --retry-failed reopened the run.")


class SessionOpened(_Event):
    type: Literal["session_opened"]
    server: str
    protocol_version: str | None
    server_info: dict[str, Any]
    reconnects: int | None = Field(None, description="How many times this server's session was reopened so far.")
    down_s: float | None = Field(None, description="Seconds the server was unreachable before this reconnect.")


class SessionLost(_Event):
    type: Literal["session_lost"]
    server: str
    error: str = Field(description="How the loss showed (the first line of the error).")


class SessionRetrying(_Event):
    type: Literal["session_retrying"]
    server: str
    attempt: int = Field(description="Failed attempts in this outage (the connection loss counts as the first).")
    delay_s: float = Field(description="The next attempt starts after exactly this many seconds.")
    remaining_s: float = Field(description="Seconds left in the outage's budget (connect_timeout or reconnect).")
    error: str


class SessionFailed(_Event):
    type: Literal["session_failed"]
    server: str
    kind: Kind
    error: str


class StepStarted(_Event):
    type: Literal["step_started"]
    step: str
    items: int | None = Field(None, description="The fan-out's size.")
    reused: int | None = Field(None, description="Items whose result a resume takes from the journal.")


class StepSkipped(_Event):
    type: Literal["step_skipped"]
    step: str
    reason: str


class ItemDispatched(_Event):
    type: Literal["item_dispatched"]
    step: str
    item: str
    index: int | None
    server: str
    tool: str
    request_id: int | str
    progress_token: int | str
    attempt: int


class ProgressEvent(_Event):
    type: Literal["progress"]
    step: str
    item: str
    progress: float
    total: float | None
    message: str | None


class LogEvent(_Event):
    type: Literal["log"]
    server: str
    level: str
    logger: str | None
    data: Any
    step: str | None = None
    item: str | None = None


class StreamResumed(_Event):
    type: Literal["stream_resumed"]
    step: str
    item: str
    last_event_id: str


class ItemSucceeded(_Event):
    type: Literal["item_succeeded"]
    step: str
    item: str
    index: int | None
    result: dict[str, Any] = Field(description="The MCP tools/call result.")


class ItemFailed(_Event):
    type: Literal["item_failed"]
    step: str
    item: str
    index: int | None
    kind: Kind
    error: str
    result: dict[str, Any] | None = None
    retrying: bool | None = Field(None, description="True when another attempt follows.")
    retry_in: float | None = Field(
        None, description="A call safe to repeat whose outcome was unknown is made again after this many seconds."
    )


class StepFinished(_Event):
    type: Literal["step_finished"]
    step: str
    status: StepStatusName
    counts: dict[str, int]
    error: str | None = None


class RunFinished(_Event):
    type: Literal["run_finished", "run_stopped", "run_interrupted"] = Field(
        description="run_finished closes the run (succeeded, failed); run_stopped (in-doubt, incomplete) and "
        "run_interrupted leave it open for a resume."
    )
    status: RunStatus
    exit_code: int
    outputs: dict[str, Any] | None = None


JournalEvent = Annotated[
    RunStarted
    | RunResumed
    | SessionOpened
    | SessionLost
    | SessionRetrying
    | SessionFailed
    | StepStarted
    | StepSkipped
    | ItemDispatched
    | ProgressEvent
    | LogEvent
    | StreamResumed
    | ItemSucceeded
    | ItemFailed
    | StepFinished
    | RunFinished,
    Field(discriminator="type"),
]


def summary_schema() -> dict[str, Any]:
    schema = Summary.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def journal_event_schema() -> dict[str, Any]:
    schema = TypeAdapter(JournalEvent).json_schema()
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
    for path, schema in ((SUMMARY_SCHEMA_PATH, summary_schema()), (JOURNAL_SCHEMA_PATH, journal_event_schema())):
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
