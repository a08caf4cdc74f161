"""The workflow file's shape, as pydantic models: the source of ``schemas/workflow.schema.json``.

A workflow (YAML, ``version: 1``)::

    version: 1
    name: optional title
    description: optional text
    servers:                       # name -> one server
      fs: {command: [npx, server-fs, /data], env: {KEY: "${{ env.KEY }}"}, cwd: /tmp}
      md: {url: "https://example.com/mcp", headers: {Authorization: "Bearer ${{ env.TOKEN }}"}}
    inputs:                        # name -> declaration; names are identifiers
      dir: {type: string, default: docs, description: where to look}
    steps:                         # id -> step; ids are identifiers
      list: {server: fs, tool: list_directory, args: {path: "${{ inputs.dir }}"}}
      convert:
        server: md
        tool: convert
        for_each: "${{ steps.list.json }}"
        args: {path: "${{ item }}"}
    outputs:                       # name -> any JSON-like value, templates allowed
      pages: "${{ steps.convert.results[*].text }}"

These models check *shape* only (unknown keys are refused, types are strict: ``"5"`` is not an integer
and ``yes`` is not a boolean). What needs the whole workflow (servers that exist, templates, references,
cycles, one of ``command``/``url``) is checked by :mod:`runner.workflow.plan`; where a value sits in the file is
recorded by :mod:`runner.workflow.loader` in a :class:`~runner.workflow.positions.Positions`. A run's input values
are resolved against the declared :class:`Input` types by :mod:`runner.workflow.inputs`.

Regenerate the JSON schema with ``python -m runner.workflow.model`` (writes ``schemas/workflow.schema.json``;
``--check`` only compares). ``scripts/gen_schema.py`` does the same.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from runner.protocol.versions import ProtocolChoice
from runner.workflow.auth import ServerAuth
from runner.workflow.fields import Budget, Duration, Limit, Rate
from runner.workflow.positions import describe

__all__ = [
    "ENV_PATTERN",
    "IDENTIFIER",
    "INPUT_TYPES",
    "SCHEMA_PATH",
    "Input",
    "InputType",
    "Reconcile",
    "Server",
    "Step",
    "Workflow",
    "json_schema",
    "schema_text",
    "value_has_type",
    "write_schema",
]

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
INPUT_TYPES: tuple[str, ...] = ("string", "integer", "number", "boolean", "array", "object")
InputType = Literal["string", "integer", "number", "boolean", "array", "object"]
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "workflow.schema.json"

_TEMPLATE_SCHEMA = r".*\$\{\{.*\}\}.*"
Identifier = Annotated[
    str,
    StringConstraints(pattern=IDENTIFIER.pattern),
]


ENV_PATTERN = re.compile(r"^[A-Za-z_*][A-Za-z0-9_*]*$")
"""An ``env_passthrough`` entry: a variable name, where ``*`` matches any characters (``npm_config_*``)."""


def _env_pattern(value: str) -> str:
    if not ENV_PATTERN.match(value):
        raise PydanticCustomError(
            "workflow",
            "{message}",
            {
                "message": "expected an environment variable name (letters, digits and _), where * matches any "
                f"characters (npm_config_*), found {describe(value)}"
            },
        )
    if not value.strip("*"):
        raise PydanticCustomError(
            "workflow",
            "{message}",
            {
                "message": f"{value!r} would pass mcp-run's whole environment through, defeating the allow-list "
                "(and every value passed through is masked as a secret); name the variables, or a prefix "
                "such as npm_config_*"
            },
        )
    return value


EnvPattern = Annotated[
    str,
    AfterValidator(_env_pattern),
    WithJsonSchema({"type": "string", "pattern": ENV_PATTERN.pattern}),
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)


class Server(_Model):
    """One MCP server: stdio (``command``) or Streamable HTTP (``url``), never both."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["command"]}, {"required": ["url"]}]},
    )

    command: list[str] | None = Field(
        default=None,
        min_length=1,
        description="stdio: the argv list that starts the server (no shell). A program path with a / is relative "
        "to the workflow's folder; a bare name is looked up on PATH, then beside mcp-run's Python.",
    )
    env: dict[str, str] | None = Field(
        default=None, description="stdio: extra environment variables; values may hold templates over env and inputs."
    )
    env_passthrough: list[EnvPattern] | None = Field(
        default=None,
        description="stdio: variables of mcp-run's environment the server also gets, besides the allow-list "
        "(HOME, PATH, ...) and env; * matches any characters (npm_config_*). Unset ones are absent.",
    )
    cwd: str | None = Field(
        default=None,
        description="stdio: the working directory of the server process, relative to the workflow's folder "
        "(default: the workflow's folder).",
    )
    url: str | None = Field(
        default=None, description="Streamable HTTP: the endpoint URL; may hold templates over env and inputs."
    )
    headers: dict[str, str] | None = Field(
        default=None,
        description="Streamable HTTP: extra request headers; values may hold templates over env and inputs.",
    )
    auth: ServerAuth | None = Field(
        default=None, description="Streamable HTTP: OAuth (client credentials, jwt-bearer, or a stored login)."
    )
    max_concurrency: int = Field(default=8, ge=1, description="At most this many calls in flight on this server.")
    rate: Rate | None = Field(
        default=None,
        description="At most this many calls start per second or minute (20/s, 300/min): a hard pace. Without "
        "it, a server that answers 429 or 503 is paced to what it admits.",
    )
    timeout: Limit | None = Field(default=None, description="Default hard cap for one call (default: none).")
    idle_timeout: Limit | None = Field(
        default=None,
        description="Default cap on time without progress for one call; progress notifications reset it "
        "(default: 5m; `none` to wait forever).",
    )
    connect_timeout: Duration | None = Field(
        default=None,
        description="Bound on starting or reaching the server and its handshake, and on listing its tools "
        "(default: 30s, or --connect-timeout).",
    )
    reconnect: Budget | None = Field(
        default=None,
        description="After the server went away mid-run (a stdio process exited, an HTTP server stopped answering), "
        "keep reconnecting for this long, with backoff, before the items left are given up (default: 5m; "
        "false: never).",
    )
    trust_annotations: bool = Field(
        default=False, description="Believe the server's tool annotations (idempotentHint) when deciding on retries."
    )
    transport: Literal["auto", "streamable-http", "sse"] | None = Field(
        default=None,
        description="HTTP: auto (default) tries Streamable HTTP, then the 2024-11-05 HTTP+SSE transport when the "
        "server refuses the first POST; streamable-http never falls back; sse speaks HTTP+SSE only (url is its "
        "GET endpoint).",
    )
    elicitation: Literal["decline", "defaults"] | None = Field(
        default=None,
        description="What a form elicitation of this server gets: decline (default), or defaults: accept with the "
        "schema's defaults when every required field has one (else decline). --elicitation overrides it.",
    )
    roots: list[str] | None = Field(
        default=None,
        description="The roots offered to this server when it asks (roots/list): folders, relative to the "
        "workflow's folder, or URIs (file:///...). Default: none, and the capability is not declared.",
    )
    tasks: Literal["auto", "off"] = Field(
        default="auto",
        description="Tool calls as tasks, when the server offers them: `auto` asks for a task whenever the tool "
        "allows one (its id is journaled, so a resume collects the result of a call in flight at a crash); `off` "
        "only when the tool requires one.",
    )
    protocol: ProtocolChoice = Field(
        default="auto",
        description="The MCP revision to speak: auto (try 2026-07-28, fall back to the initialize handshake of "
        "older servers) or an exact revision; a server that does not speak it is an error. --protocol-version "
        "overrides it.",
    )


class Input(_Model):
    """One workflow input: its type, default, and whether it is a secret (masked in output)."""

    type: InputType = Field(default="string", description="The input's JSON type.")
    default: Any = Field(default=None, description="The value used when none is given; makes the input optional.")
    description: str | None = Field(default=None, description="What the input is for (shown by `mcp-run plan`).")
    secret: bool = Field(default=False, description="Mask the value in logs, journals and summaries.")
    required: bool | None = Field(default=None, description="Must be given; defaults to true when there is no default.")

    @property
    def has_default(self) -> bool:
        """True when the workflow gave a default (even ``null``)."""
        return "default" in self.model_fields_set

    @property
    def is_required(self) -> bool:
        """Whether a run must be given this input."""
        return self.required if self.required is not None else not self.has_default

    @field_validator("default")
    @classmethod
    def _default_has_type(cls, value: Any, info: Any) -> Any:
        kind = info.data.get("type", "string")
        if value is not None and not value_has_type(value, kind):
            raise PydanticCustomError(
                "workflow",
                "{message}",
                {"message": f"default does not match type {kind}: found {describe(value)}"},
            )
        return value

    @field_validator("secret")
    @classmethod
    def _secret_is_text(cls, value: bool, info: Any) -> bool:
        kind = info.data.get("type", "string")
        if value and kind != "string":
            raise PydanticCustomError(
                "workflow",
                "{message}",
                {
                    "message": f"a secret input must be of type string, not {kind}: secrets are masked as text, "
                    "and a value masked as text would no longer be of its type when a resume reads it back"
                },
            )
        return value


class Reconcile(_Model):
    """How to settle an item of the step left in doubt (its call may have happened) by asking the server."""

    tool: str = Field(description="The tool that says whether the call happened (on the step's server).")
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="Its arguments; templates may read item, key, index and args (the step's rendered arguments).",
    )
    done: str = Field(
        description="A template over result (the reconcile tool's result: result.json, result.text, ...) that is "
        "true when the call happened, false when it surely did not: ${{ result.json.processed }}."
    )
    idempotent: bool = Field(
        default=False,
        description="The reconcile tool is safe to repeat (read-only or idempotent); required unless the server "
        "is trusted (trust_annotations) and annotates it so.",
    )


class Step(_Model):
    """One tool call, or a fan-out of calls (``for_each``)."""

    server: str = Field(description="The name of a server under `servers`.")
    tool: str = Field(description="The tool to call.")
    args: dict[str, Any] = Field(
        default_factory=dict, description="The tool's arguments; strings anywhere inside may hold templates."
    )
    needs: list[str] = Field(
        default_factory=list, description="Steps that must finish first (in addition to those templates use)."
    )
    if_: Annotated[Any, WithJsonSchema({"type": ["string", "boolean"]})] = Field(
        default=None,
        alias="if",
        description="Run the step only when this template is truthy: ${{ expr }}. By default a step runs only when "
        "every dependency succeeded (success()); an if that calls a status function (success(), failure(), "
        "always()) decides that itself: ${{ always() }}, ${{ failure() }}, ${{ !failure() }}.",
    )
    for_each: Annotated[Any, WithJsonSchema({"type": ["string", "array"]})] = Field(
        default=None, description="Fan out: a template that evaluates to a list (or a literal list); one call per item."
    )
    key: str | None = Field(
        default=None, description="Template rendered per item to its identity; default: SHA-256 of its canonical JSON."
    )
    concurrency: int | None = Field(default=None, ge=1, description="Fan-out: at most this many items in flight.")
    timeout: Limit | None = Field(default=None, description="Hard cap for one call (default: the server's).")
    idle_timeout: Limit | None = Field(
        default=None, description="Cap on time without progress for one call (default: the server's; `none`: no cap)."
    )
    idempotent: bool = Field(default=False, description="Safe to call again when an outcome is unknown.")
    continue_on_error: bool = Field(default=False, description="A failure of this step does not fail the run.")
    cache: Duration | None = Field(
        default=None,
        description="Reuse results of earlier runs of this workflow: a call whose server, tool, rendered arguments "
        "(and cache_key) match one that succeeded in an earlier run within this duration (7d, 12h) is not made; "
        "its result is taken from that run's journal (reused). --no-cache ignores it for one run.",
    )
    cache_key: str | None = Field(
        default=None,
        description="With cache: a template rendered per item and added to the cache's key, e.g. a file's "
        "modification time or hash from an earlier step: ${{ item.mtime }}. Only its SHA-256 is journaled.",
    )
    reconcile: Reconcile | None = Field(
        default=None,
        description="On resume, an item in doubt is settled by calling this tool first: done true records it as "
        "succeeded (reconciled), false calls it again, an error leaves it in doubt.",
    )

    @field_validator("if_")
    @classmethod
    def _if_shape(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str | bool):
            raise PydanticCustomError(
                "workflow",
                "{message}",
                {
                    "message": "expected a template string like ${{ inputs.flag }} or a boolean, "
                    f"found {describe(value)}"
                },
            )
        return value

    @field_validator("for_each")
    @classmethod
    def _for_each_shape(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str | list):
            raise PydanticCustomError(
                "workflow",
                "{message}",
                {"message": f"expected a template like ${{{{ steps.list.json }}}} or a list, found {describe(value)}"},
            )
        return value

    @property
    def fan_out(self) -> bool:
        """True when the step calls its tool once per item."""
        return self.for_each is not None


class Workflow(_Model):
    """A whole workflow file."""

    model_config = ConfigDict(
        title="mcp-run workflow",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    version: int = Field(description="The format version; must be 1.")
    name: str | None = Field(default=None, description="A short title.")
    description: str | None = Field(default=None, description="What the workflow does.")
    servers: dict[str, Server] = Field(default_factory=dict, description="Named MCP servers.")
    inputs: dict[Identifier, Input] = Field(
        default_factory=dict, description="Named inputs, given with --input NAME=VALUE or an inputs file."
    )
    steps: dict[Identifier, Step] = Field(description="Named steps; ids are identifiers.")
    outputs: dict[str, Any] = Field(
        default_factory=dict, description="Named results, rendered from step results at the end."
    )

    @field_validator("version")
    @classmethod
    def _version_one(cls, value: int) -> int:
        if value != 1:
            raise PydanticCustomError("workflow", "{message}", {"message": f"unsupported version {value}: expected 1"})
        return value


def value_has_type(value: Any, kind: str) -> bool:
    """Whether ``value`` is of the input type ``kind`` (an integer counts as a number; a bool as neither)."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return False


# ---------------------------------------------------------------------------------------------------
# The JSON schema


def json_schema() -> dict[str, Any]:
    """The JSON schema of a workflow file, generated from :class:`Workflow`."""
    schema = Workflow.model_json_schema(by_alias=True)
    ordered: dict[str, Any] = {"$schema": schema.pop("$schema")}
    ordered.update(schema)
    for name in ("inputs", "steps"):
        ordered["properties"][name]["additionalProperties"] = False
    return ordered


def schema_text() -> str:
    """The exact text of ``schemas/workflow.schema.json``."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def write_schema(path: Path = SCHEMA_PATH, *, check: bool = False) -> bool:
    """Write the schema to ``path``; with ``check``, only compare. True when the file is (now) fresh."""
    text = schema_text()
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if check or current == text:
        return current == text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def _main(argv: Sequence[str]) -> int:
    check = "--check" in argv
    if not write_schema(check=check):
        sys.stderr.write(f"{SCHEMA_PATH} is stale; regenerate it with: python -m runner.workflow.model\n")
        return 1
    sys.stdout.write(f"{SCHEMA_PATH} is up to date\n" if check else f"wrote {SCHEMA_PATH}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
