"""Every call is checked against its server's tool list before it is sent (runner/engine/calls/tools.py): the
scheduler on scripted fake servers, on trio's virtual clock."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from runner.exitcodes import ExitCode
from runner.protocol.jsonrpc import ErrorResponse, Notification, Request
from runner.workflow import argcheck
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, Resume, plan_of, run_plan

CONVERT_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
    "required": ["path", "count"],
}

FANOUT = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  counts: {type: array, default: [1, 0, 2]}
steps:
  each:
    server: s
    tool: convert
    for_each: ${{ inputs.counts }}
    key: c${{ item }}
    args: {path: "p${{ item }}", count: "${{ item }}"}
"""


async def convert(call: FakeCall) -> dict[str, Any]:
    return text_result(f"converted {call.arguments.get('path')}")


def strict(server: FakeServer) -> None:
    server.tools.update(convert=convert, get_current_time=convert, convert_time=convert)
    server.schemas["convert"] = CONVERT_SCHEMA


def calls(server: FakeServer) -> list[str]:
    return [str((c.params or {}).get("arguments", {}).get("path")) for c in server.calls]


def lists(server: FakeServer) -> int:
    return sum(1 for m in server.received if isinstance(m, Request) and m.method == "tools/list")


async def test_arguments_the_schema_refuses_are_not_sent(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": strict})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(FANOUT), harness, events=events, concurrency=1)
    assert outcome.status == "failed" and outcome.exit_code == ExitCode.FAILED
    (server,) = harness.servers["s"]
    assert calls(server) == ["p1", "p2"]  # the refused item never reached the server
    assert [e["item"] for e in events if e["type"] == "item_dispatched"] == ["c1", "c2"]
    (failed,) = [e for e in events if e["type"] == "item_failed"]
    assert failed["item"] == "c0" and failed["kind"] == "invalid-call"
    assert failed["error"] == (
        "args.count: 0 is less than the minimum of 1 (refused by the inputSchema of convert; not sent)"
    )
    assert outcome.steps["each"].counts()["failed"] == 1


async def test_an_unknown_tool_fails_its_items_with_the_closest_names(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": strict})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(FANOUT.replace("tool: convert", "tool: get_time")), harness, events=events)
    assert outcome.exit_code == ExitCode.FAILED
    (server,) = harness.servers["s"]
    assert server.calls == []
    failed = [e for e in events if e["type"] == "item_failed"]
    assert [e["kind"] for e in failed] == ["invalid-call"] * 3
    assert {e["error"] for e in failed} == {"server s has no tool 'get_time'; did you mean 'get_current_time'?"}
    assert not [e for e in events if e["type"] == "item_dispatched"]


def count_compilations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    compiled: list[str] = []
    original = argcheck.compile_schema

    def counting(schema: dict[str, Any]) -> argcheck.ArgsValidator:
        compiled.append(str(schema.get("title")))
        return original(schema)

    monkeypatch.setattr(argcheck, "compile_schema", counting)
    return compiled


async def test_the_tools_are_listed_and_each_schema_compiled_once_per_session(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = count_compilations(monkeypatch)

    def setup(server: FakeServer) -> None:
        strict(server)
        server.schemas["convert"] = {**CONVERT_SCHEMA, "title": "convert"}
        server.schemas["convert_time"] = {"type": "object", "title": "convert_time"}

    text = FANOUT.replace("[1, 0, 2]", str(list(range(1, 41)))) + (
        "  after: {server: s, tool: convert_time, args: {n: '${{ length(steps.each.items) }}'}}\n"
    )
    harness = Harness({"s": setup})
    outcome = await run_plan(plan_of(text), harness, concurrency=8)
    assert outcome.status == "succeeded"
    (server,) = harness.servers["s"]
    assert len(server.calls) == 41
    assert lists(server) == 1
    assert compiled == ["convert", "convert_time"]


async def test_a_changed_tool_list_is_listed_again_when_a_call_needs_it(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After notifications/tools/list_changed the next call lists the tools again: a schema the new list
    changed is compiled again, one it did not change is not."""
    compiled = count_compilations(monkeypatch)

    def setup(server: FakeServer) -> None:
        strict(server)
        server.schemas["convert"] = {**CONVERT_SCHEMA, "title": "v1"}
        server.schemas["convert_time"] = {"type": "object", "title": "unchanged"}

        async def tighten(call: FakeCall) -> dict[str, Any]:
            if call.arguments.get("count") == 2:  # the server changes its tools while serving the second item
                server.schemas["convert"] = {**CONVERT_SCHEMA, "title": "v2", "properties": {"count": {"maximum": 2}}}
                await server.end.send(Notification("notifications/tools/list_changed"))
            return await convert(call)

        server.tools["convert"] = tighten

    text = FANOUT.replace("[1, 0, 2]", "[1, 2, 3]").replace(
        "    tool: convert\n", "    tool: convert\n    needs: [first]\n"
    )
    text += "    continue_on_error: true\n    concurrency: 1\n"
    text += "  first: {server: s, tool: convert_time, args: {path: first}}\n"
    text += "  after: {server: s, tool: convert_time, args: {path: '${{ length(steps.each.items) }}'}}\n"
    harness = Harness({"s": setup})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(text), harness, events=events, concurrency=1)
    (server,) = harness.servers["s"]
    assert calls(server) == ["first", "p1", "p2", "3"]  # p3 was refused by the new schema
    assert [e["item"] for e in events if e["type"] == "item_failed"] == ["c3"]
    assert lists(server) == 2
    assert compiled == ["unchanged", "v1", "v2"]  # convert_time's schema did not change: not compiled again
    assert outcome.status == "succeeded"  # continue_on_error


async def test_an_invalid_schema_is_warned_about_once_and_its_calls_go_out(autojump_clock: trio.abc.Clock) -> None:
    def setup(server: FakeServer) -> None:
        strict(server)
        server.schemas["convert"] = {"type": "object", "properties": {"count": {"type": "bogus"}}}

    harness = Harness({"s": setup})
    warnings: list[str] = []
    outcome = await run_plan(plan_of(FANOUT), harness, warnings=warnings)
    assert outcome.status == "succeeded"
    assert len(harness.servers["s"][0].calls) == 3
    assert warnings == [
        "s: tool convert: its inputSchema is not a valid JSON Schema: properties.count.type: 'bogus' is not valid "
        "under any of the given schemas; its calls go out without checking their arguments"
    ]


async def test_a_server_that_cannot_list_its_tools_is_warned_about_once_and_called(
    autojump_clock: trio.abc.Clock,
) -> None:
    def setup(server: FakeServer) -> None:
        strict(server)
        server.list_error = ErrorResponse(None, -32601, "Method not found")

    harness = Harness({"s": setup})
    warnings: list[str] = []
    outcome = await run_plan(plan_of(FANOUT), harness, warnings=warnings)
    (server,) = harness.servers["s"]
    assert len(server.calls) == 3 and lists(server) == 1
    assert outcome.exit_code == ExitCode.OK  # the server said nothing against count 0: it was sent
    assert warnings == [
        "s: could not list its tools (tools/list: server error -32601: Method not found); "
        "calls go out without checking their arguments"
    ]


async def test_a_resume_calls_what_was_refused_once_the_server_accepts_it(autojump_clock: trio.abc.Clock) -> None:
    events: list[dict[str, Any]] = []
    await run_plan(plan_of(FANOUT), Harness({"s": strict}), events=events)

    def relaxed(server: FakeServer) -> None:
        strict(server)
        server.schemas["convert"] = {"type": "object"}

    harness = Harness({"s": relaxed})
    outcome = await run_plan(plan_of(FANOUT), harness, prior=Resume(events))
    assert outcome.status == "succeeded"
    assert calls(harness.servers["s"][0]) == ["p0"]  # only the refused item; the others succeeded before


async def test_an_item_in_doubt_made_again_by_decision_is_not_checked(autojump_clock: trio.abc.Clock) -> None:
    """An item an earlier attempt dispatched with no answer may have run. Made again by --rerun-in-doubt, it
    goes out as it did (the server decides); a refusal by the check would record "not sent" and lose the
    fact that it may have run. An item that never went out is still checked."""
    plan = plan_of(FANOUT)
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": strict}), events=events, concurrency=1)
    # c0 was refused by the check; pretend instead that an earlier attempt dispatched it and crashed
    started = [e for e in events if e["type"] in ("run_started", "step_started")]
    dispatched = {**next(e for e in events if e["type"] == "item_dispatched"), "item": "c0", "index": 1}
    cut = [*started, dispatched]
    harness = Harness({"s": strict})
    resumed: list[dict[str, Any]] = []
    await run_plan(plan, harness, prior=Resume(events=cut, in_doubt="rerun"), events=resumed, concurrency=1)
    (server,) = harness.servers["s"]
    assert sorted(calls(server)) == ["p0", "p1", "p2"]  # c0 went out; the server answers for it
    assert [e["kind"] for e in resumed if e["type"] == "item_failed"] == []


async def test_a_pattern_that_backtracks_too_much_is_warned_about_once_and_its_calls_go_out(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jsonschema would search the pattern with re, which cannot be stopped: the run would hang, deaf to signals.
    The search is stopped after PATTERN_TIMEOUT: that call cannot be checked and goes out, and so do the tool's
    later calls (a slow pattern holds the run up once, not once per item)."""
    monkeypatch.setattr(argcheck, "PATTERN_TIMEOUT", 0.001)

    def setup(server: FakeServer) -> None:
        strict(server)
        # (x+x+)+y on a run of x's with no y: every way to split the run is tried
        server.schemas["convert"] = {"type": "object", "properties": {"path": {"pattern": "(x+x+)+y"}}}

    items = ["no", "x" * 5000, "no again"]
    text = FANOUT.replace("[1, 0, 2]", json.dumps(items)).replace('"p${{ item }}"', '"${{ item }}"')
    harness = Harness({"s": setup})
    warnings: list[str] = []
    events: list[dict[str, Any]] = []
    outcome = await run_plan(
        plan_of(text.replace("key: c${{ item }}", "key: k${{ index }}")),
        harness,
        warnings=warnings,
        events=events,
        concurrency=1,
    )
    assert calls(harness.servers["s"][0]) == items[1:]  # the first was checked, and refused
    assert [(e["item"], e["kind"]) for e in events if e["type"] == "item_failed"] == [("k0", "invalid-call")]
    assert outcome.steps["each"].counts()["succeeded"] == 2
    assert warnings == [
        "s: tool convert: its inputSchema's pattern '(x+x+)+y' was stopped after 0.001 s on a text of 5,000 "
        "characters (it backtracks too much); its calls go out without checking their arguments"
    ]


async def test_a_call_repeated_after_an_unknown_outcome_is_not_checked_again(autojump_clock: trio.abc.Clock) -> None:
    """A safe call whose first attempt may have run is made again as it was: its check was passed before the
    first attempt. Checked again, a schema tightened meanwhile would record "not sent" for a call that may
    have run."""
    from runner.errors import OutcomeUnknown
    from runner.transports.base import RequestLost

    def setup(server: FakeServer) -> None:
        strict(server)

        async def drop_once(call: FakeCall) -> dict[str, Any] | None:
            if len(server.calls) == 1:
                # The server tightens its schema while the first attempt is in flight; the stream is then lost.
                server.schemas["convert"] = {**CONVERT_SCHEMA, "properties": {"count": {"maximum": 0}}}
                await server.end.send(Notification("notifications/tools/list_changed"))
                await server.end.send(RequestLost(call.request.id, OutcomeUnknown("stream dropped")))
                return None
            return await convert(call)

        server.tools["convert"] = drop_once

    text = FANOUT.replace("[1, 0, 2]", "[1]") + "    idempotent: true\n"
    harness = Harness({"s": setup})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(text), harness, events=events)
    assert calls(harness.servers["s"][0]) == ["p1", "p1"]  # made again, not refused by the new schema
    assert outcome.status == "succeeded"
    assert [e["kind"] for e in events if e["type"] == "item_failed"] == ["outcome-unknown"]  # the first attempt
