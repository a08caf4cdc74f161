"""MCP wire types a batch client needs: versions, tools, call results, progress and log notifications.

Parsing is tolerant where the specification is (unknown fields are kept in ``raw``, unknown content block
types are kept as they came) and strict where a wrong shape would mislead us (a result without a
``content`` list, a tool without a name): those raise ``MalformedMessage``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from runner.errors import MalformedMessage, ServerError
from runner.exitcodes import ExitCode

__all__ = [
    "LATEST_PROTOCOL_VERSION",
    "LOG_LEVELS",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "ContentBlock",
    "LogMessage",
    "Progress",
    "Tool",
    "ToolAnnotations",
    "ToolError",
    "ToolResult",
    "parse_log_message",
    "parse_progress",
    "parse_tool",
    "parse_tool_result",
]

LATEST_PROTOCOL_VERSION: Final = "2025-11-25"
SUPPORTED_PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

# RFC 5424 severities, least to most severe, as MCP names them.
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

ContentType = Literal["text", "image", "audio", "resource", "resource_link"]


HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


@dataclass(slots=True, frozen=True)
class ToolAnnotations:
    """Hints about a tool's behaviour. Untrusted unless the server is trusted: shown, never relied on.
    A hint the server left out has the specification's default; ``given`` names the hints it did send
    (``readOnlyHint``, ...), so a tool without annotations is not shown as "destructive"."""

    title: str | None = None
    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True
    given: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, raw: Any) -> ToolAnnotations:
        if not isinstance(raw, dict):
            return cls()

        def flag(name: str, default: bool) -> bool:
            value = raw.get(name)
            return value if isinstance(value, bool) else default

        title = raw.get("title")
        return cls(
            title=title if isinstance(title, str) else None,
            read_only=flag("readOnlyHint", False),
            destructive=flag("destructiveHint", True),
            idempotent=flag("idempotentHint", False),
            open_world=flag("openWorldHint", True),
            given=frozenset(name for name in HINTS if isinstance(raw.get(name), bool)),
        )


@dataclass(slots=True, frozen=True)
class Tool:
    name: str
    input_schema: dict[str, Any]
    title: str | None = None
    description: str | None = None
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)
    output_schema: dict[str, Any] | None = None
    task_support: str = "forbidden"
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


def parse_tool(raw: Any) -> Tool:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise MalformedMessage(f"tools/list: a tool must be an object with a string name, got {raw!r:.200}")
    schema = raw.get("inputSchema")
    if not isinstance(schema, dict):
        schema = {"type": "object"}
    execution = raw.get("execution")
    task_support = execution.get("taskSupport") if isinstance(execution, dict) else None
    title = raw.get("title")
    description = raw.get("description")
    output_schema = raw.get("outputSchema")
    return Tool(
        name=raw["name"],
        input_schema=schema,
        title=title if isinstance(title, str) else None,
        description=description if isinstance(description, str) else None,
        annotations=ToolAnnotations.parse(raw.get("annotations")),
        output_schema=output_schema if isinstance(output_schema, dict) else None,
        task_support=task_support if isinstance(task_support, str) else "forbidden",
        raw=raw,
    )


@dataclass(slots=True, frozen=True)
class ContentBlock:
    """One content block of a result; ``raw`` is the block as the server sent it."""

    type: str
    raw: dict[str, Any]

    @property
    def text(self) -> str | None:
        value = self.raw.get("text") if self.type == "text" else None
        return value if isinstance(value, str) else None


@dataclass(slots=True, frozen=True)
class ToolResult:
    """What ``tools/call`` returned: content blocks, structured content, and whether the tool failed."""

    content: tuple[ContentBlock, ...]
    structured_content: dict[str, Any] | None
    is_error: bool
    raw: dict[str, Any]

    @property
    def text(self) -> str:
        """The text content blocks joined with a newline."""
        return "\n".join(t for b in self.content if (t := b.text) is not None)


class ToolError(ServerError):
    """The tool ran and reported failure (``isError: true``); ``result`` holds what it returned."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, result: ToolResult) -> None:
        super().__init__(message)
        self.result = result


def parse_tool_result(raw: dict[str, Any]) -> ToolResult:
    content = raw.get("content")
    if not isinstance(content, list):
        if "task" in raw:
            raise MalformedMessage("tools/call: the server answered with a task, which mcp-run did not ask for")
        raise MalformedMessage(f'tools/call: result must have a "content" list, got {content!r:.200}')
    blocks = []
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise MalformedMessage(f"tools/call: a content block must be an object with a type: {block!r:.200}")
        blocks.append(ContentBlock(block["type"], block))
    structured = raw.get("structuredContent")
    if structured is not None and not isinstance(structured, dict):
        raise MalformedMessage("tools/call: structuredContent must be an object")
    is_error = raw.get("isError", False)
    return ToolResult(tuple(blocks), structured, is_error is True, raw)


@dataclass(slots=True, frozen=True)
class Progress:
    progress: float
    total: float | None = None
    message: str | None = None


def parse_progress(params: dict[str, Any]) -> Progress | None:
    progress = params.get("progress")
    if not isinstance(progress, int | float) or isinstance(progress, bool):
        return None
    total = params.get("total")
    message = params.get("message")
    return Progress(
        float(progress),
        float(total) if isinstance(total, int | float) and not isinstance(total, bool) else None,
        message if isinstance(message, str) else None,
    )


@dataclass(slots=True, frozen=True)
class LogMessage:
    level: str
    data: Any
    logger: str | None = None

    @property
    def severity(self) -> int:
        """Index in ``LOG_LEVELS``; unknown levels count as ``info``."""
        try:
            return LOG_LEVELS.index(self.level)
        except ValueError:
            return 1


def parse_log_message(params: dict[str, Any]) -> LogMessage:
    level = params.get("level")
    logger = params.get("logger")
    return LogMessage(
        level if isinstance(level, str) else "info",
        params.get("data"),
        logger if isinstance(logger, str) else None,
    )
