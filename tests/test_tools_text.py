"""``mcp-run tools``: a tool's hints as the server gave them; a tool without annotations is not "destructive"."""

from __future__ import annotations

from typing import Any

from runner.cli.servers import render_tools
from runner.protocol.mcp import Tool, parse_tool


def tool(annotations: Any = None) -> Tool:
    raw: dict[str, Any] = {"name": "t", "inputSchema": {"type": "object", "properties": {"p": {"type": "string"}}}}
    if annotations is not None:
        raw["annotations"] = annotations
    return parse_tool(raw)


def first_line(annotations: Any = None) -> str:
    return render_tools([tool(annotations)]).splitlines()[0]


def test_a_tool_without_annotations_says_so() -> None:
    assert first_line() == "t  [no annotations]"
    assert first_line({"title": "T"}) == "t -- T  [no annotations]"


def test_hints_given_are_shown_as_hints() -> None:
    assert first_line({"readOnlyHint": True}) == "t  [read-only] (hints, unverified)"
    assert first_line({"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}) == (
        "t  [idempotent, destructive] (hints, unverified)"
    )
    assert first_line({"destructiveHint": False}) == "t"


def test_destructive_by_the_specification_s_default_is_marked_as_such() -> None:
    assert first_line({"idempotentHint": True}) == "t  [idempotent, destructive by default] (hints, unverified)"
