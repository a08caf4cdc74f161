"""What mcp-run answers a server's own requests (elicitation, roots, sampling): the pure policy, the 2025
session's answers over a scripted server, and the 2026 ``input_required`` loop over scripted results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from runner.cli.options import ELICITATION_CHOICES
from runner.engine.calls.servers import answer_policy
from runner.errors import JsonRpcError, MalformedMessage, ProtocolError
from runner.protocol.jsonrpc import ErrorResponse, Request, Response
from runner.protocol.mcp import LogMessage
from runner.session import AnswerPolicy, ElicitationPolicy, Root, resolve_input_required
from runner.session.answers import (
    ELICITATION_POLICIES,
    Answer,
    answer_request,
    elicitation_defaults,
    roots_from_config,
    url_elicitation_text,
)
from runner.session.input_required import answer_input_requests
from runner.workflow.fingerprints import fingerprints
from runner.workflow.loader import validate
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.test_session import connected

DEFAULTS = AnswerPolicy(elicitation=ElicitationPolicy.DEFAULTS)

# The schema of the conformance scenario elicitation-sep1034-client-defaults (0.2.0-alpha.12).
SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
    "required": [],
}


def elicit(schema: Any, message: str = "Confirm?") -> dict[str, Any]:
    return {"mode": "form", "message": message, "requestedSchema": schema}


# -- the policy ---------------------------------------------------------------------------------------


def test_elicitation_is_declined_by_default() -> None:
    answer = answer_request(AnswerPolicy(), "elicitation/create", elicit(SEP1034_SCHEMA, "Delete it?"))
    assert answer.result == {"action": "decline"}
    assert answer.log_level == "warning"
    assert answer.summary.startswith('elicitation/create "Delete it?": declined')
    assert "--elicitation defaults" in answer.summary


def test_defaults_accept_every_primitive_of_sep1034() -> None:
    answer = answer_request(DEFAULTS, "elicitation/create", elicit(SEP1034_SCHEMA))
    assert answer.result == {
        "action": "accept",
        "content": {"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": True},
    }
    assert answer.log_level == "notice"
    assert "accepted with the schema's defaults" in answer.summary


def test_defaults_cover_titled_enums_and_multi_select() -> None:
    schema = {
        "type": "object",
        "properties": {
            "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g"}], "default": "g"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "default": ["a", "c"]},
            "labels": {
                "type": "array",
                "items": {"anyOf": [{"const": "x", "title": "X"}, {"const": "y"}]},
                "default": ["y"],
            },
            "free": {"type": "string"},  # optional, no default: left out
        },
        "required": ["colour", "tags", "labels"],
    }
    assert elicitation_defaults(schema) == ({"colour": "g", "tags": ["a", "c"], "labels": ["y"]}, "")


@pytest.mark.parametrize(
    ("prop", "why"),
    [
        ({"type": "string"}, "has no default"),
        ({"type": "string", "enum": ["a", "b"], "default": "z"}, "has a default that does not fit its type"),
        ({"type": "integer", "default": 1.5}, "has a default that does not fit its type"),
        ({"type": "integer", "default": True}, "has a default that does not fit its type"),
        ({"type": "number", "default": "3"}, "has a default that does not fit its type"),
        ({"type": "number", "default": 11, "maximum": 10}, "has a default that does not fit its type"),
        ({"type": "boolean", "default": 0}, "has a default that does not fit its type"),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": ["b"]},
            "has a default that does not fit its type",
        ),
        ({"type": "object", "default": {}}, "has a default that does not fit its type"),
    ],
)
def test_a_required_field_without_a_fitting_default_declines(prop: dict[str, Any], why: str) -> None:
    schema = {"type": "object", "properties": {"x": prop}, "required": ["x"]}
    answer = answer_request(DEFAULTS, "elicitation/create", elicit(schema))
    assert answer.result == {"action": "decline"}
    assert f'the required field "x" {why}' in answer.summary


def test_an_optional_field_whose_default_does_not_fit_is_left_out() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": "x"}, "ok": {"type": "boolean"}}}
    assert elicitation_defaults(schema) == ({}, "")


@pytest.mark.parametrize(
    "schema", [None, "x", [], {"type": "array"}, {"type": "object", "properties": []}, {"required": "x"}]
)
def test_a_schema_that_cannot_be_read_declines(schema: Any) -> None:
    answer = answer_request(DEFAULTS, "elicitation/create", elicit(schema))
    assert answer.result == {"action": "decline"}
    assert "schema" in answer.summary


def test_a_required_name_that_is_no_field_declines() -> None:
    content, why = elicitation_defaults({"type": "object", "properties": {}, "required": ["ghost"]})
    assert content is None and why == 'the required field "ghost" is not a known field'


def test_url_elicitation_is_declined_and_shows_the_url() -> None:
    params = {"mode": "url", "message": "Sign in", "url": "https://auth.example/x", "elicitationId": "1"}
    answer = answer_request(DEFAULTS, "elicitation/create", params)
    assert answer.result == {"action": "decline"}
    assert '"https://auth.example/x"' in answer.summary and "never opens" in answer.summary


def test_roots_come_from_configuration_only() -> None:
    none = answer_request(AnswerPolicy(), "roots/list", None)
    assert none.refused and none.error_code == -32601 and "roots: in the workflow" in none.summary
    policy = AnswerPolicy(roots=(Root("file:///data", "data"), Root("file:///tmp/x")))
    some = answer_request(policy, "roots/list", {})
    assert some.result == {"roots": [{"uri": "file:///data", "name": "data"}, {"uri": "file:///tmp/x"}]}
    assert some.log_level == "notice"


def test_sampling_and_unknown_methods_are_refused() -> None:
    sampling = answer_request(DEFAULTS, "sampling/createMessage", {"messages": []})
    assert sampling.refused and sampling.error_code == -32601
    assert sampling.error_message is not None and "no language model" in sampling.error_message
    other = answer_request(DEFAULTS, "resources/frobnicate", "garbage")
    assert other.refused and other.error_message == "mcp-run does not support resources/frobnicate"


def test_the_command_line_offers_every_policy() -> None:
    assert ELICITATION_CHOICES == ELICITATION_POLICIES


def test_capabilities_declare_only_what_the_policy_honours() -> None:
    assert AnswerPolicy().client_capabilities() == {}
    assert DEFAULTS.client_capabilities() == {"elicitation": {"form": {}}}
    assert AnswerPolicy(roots=(Root("file:///a"),)).client_capabilities() == {"roots": {}}


# -- the 2025 era: the session answers the server's requests -------------------------------------------


async def ask(call: FakeCall, rid: str, method: str, params: dict[str, Any] | None) -> Response | ErrorResponse:
    """Send a request from the fake server to the client and wait for its answer."""
    await call.server.end.send(Request(rid, method, params))
    while True:
        for message in call.server.received:
            if isinstance(message, Response | ErrorResponse) and message.id == rid:
                return message
        await trio.sleep(0.01)


async def test_session_answers_elicitation_roots_and_sampling_and_logs_each(autojump_clock: trio.abc.Clock) -> None:
    replies: dict[str, Response | ErrorResponse] = {}

    async def needy(call: FakeCall) -> dict[str, Any]:
        replies["e"] = await ask(call, "e", "elicitation/create", elicit(SEP1034_SCHEMA, "Who?"))
        replies["r"] = await ask(call, "r", "roots/list", None)
        replies["s"] = await ask(call, "s", "sampling/createMessage", {"messages": [], "maxTokens": 5})
        return text_result("done")

    def setup(s: FakeServer) -> None:
        s.tools["needy"] = needy

    logs: list[LogMessage] = []
    policy = AnswerPolicy(elicitation=ElicitationPolicy.DEFAULTS, roots=(Root("file:///w", "w"),))
    async with connected(setup, name="srv", answers=policy, on_log=lambda m, _rid: logs.append(m)) as (
        session,
        server,
        _,
    ):
        init = next(m for m in server.received if isinstance(m, Request) and m.method == "initialize")
        assert isinstance(init, Request) and init.params is not None
        assert init.params["capabilities"] == {"elicitation": {"form": {}}, "roots": {}, "tasks": {}}
        result = await session.call_tool("needy", {})
    assert result.text == "done"
    elicited = replies["e"]
    assert isinstance(elicited, Response) and elicited.result["action"] == "accept"
    assert elicited.result["content"]["name"] == "John Doe"
    roots = replies["r"]
    assert isinstance(roots, Response) and roots.result == {"roots": [{"uri": "file:///w", "name": "w"}]}
    sampled = replies["s"]
    assert isinstance(sampled, ErrorResponse) and sampled.code == -32601 and "no language model" in sampled.message
    assert [m.logger for m in logs] == ["mcp-run"] * 3
    texts = [str(m.data) for m in logs]
    assert texts[0].startswith('srv asked elicitation/create "Who?": accepted')
    assert texts[1].startswith("srv asked roots/list: answered 1 root(s)")
    assert texts[2].startswith("srv asked sampling/createMessage: refused")
    assert [m.level for m in logs] == ["notice", "notice", "warning"]


async def test_url_elicitation_required_fails_the_call_showing_the_url() -> None:
    async def needs_login(call: FakeCall) -> ErrorResponse:
        data = {
            "elicitations": [{"mode": "url", "elicitationId": "e1", "url": "https://x.test/login", "message": "Log in"}]
        }
        return ErrorResponse(call.request.id, -32042, "This request requires more information.", data)

    def setup(s: FakeServer) -> None:
        s.tools["deploy"] = needs_login

    async with connected(setup) as (session, _server, _):
        with pytest.raises(JsonRpcError) as caught:
            await session.call_tool("deploy", {})
    assert caught.value.code == -32042
    assert str(caught.value) == (
        "tools/call: server error -32042: This request requires more information.; a person must open "
        '"https://x.test/login" ("Log in") (mcp-run never opens URLs), then run again with --retry-failed'
    )


def test_url_elicitation_text_without_urls_is_the_message() -> None:
    assert url_elicitation_text("m", None) == "m"
    assert url_elicitation_text("m", {"elicitations": [{"url": 3}, "x"]}) == "m"


async def test_session_declines_elicitation_by_default(autojump_clock: trio.abc.Clock) -> None:
    replies: list[Response | ErrorResponse] = []

    async def needy(call: FakeCall) -> dict[str, Any]:
        replies.append(await ask(call, "e", "elicitation/create", elicit(SEP1034_SCHEMA)))
        return text_result("declined")

    def setup(s: FakeServer) -> None:
        s.tools["needy"] = needy

    async with connected(setup) as (session, server, _):
        init = next(m for m in server.received if isinstance(m, Request) and m.method == "initialize")
        assert isinstance(init, Request) and init.params is not None and init.params["capabilities"] == {"tasks": {}}
        await session.call_tool("needy", {})
    reply = replies[0]
    assert isinstance(reply, Response) and reply.result == {"action": "decline"}


# -- the 2026 era: input_required ------------------------------------------------------------------


class Scripted:
    """A ``send`` that returns scripted results in order and records the params of each request."""

    def __init__(self, *results: dict[str, Any]) -> None:
        self.results = list(results)
        self.sent: list[dict[str, Any]] = []

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(params)
        await trio.lowlevel.checkpoint()
        return self.results.pop(0)


def input_required(requests: dict[str, Any] | None = None, state: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = requests
    if state is not None:
        result["requestState"] = state
    return result


COMPLETE = {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}


async def test_a_complete_result_is_returned_at_once() -> None:
    for result in (COMPLETE, {"content": []}):  # no resultType: complete
        send = Scripted(result)
        assert await resolve_input_required(send, {"name": "t"}, AnswerPolicy()) == result
        assert send.sent == [{"name": "t"}]


async def test_input_is_answered_and_the_request_sent_again_with_the_state() -> None:
    send = Scripted(
        input_required(
            {
                "confirm": {"method": "elicitation/create", "params": elicit(SEP1034_SCHEMA)},
                "where": {"method": "roots/list"},
            },
            state="opaque-1",
        ),
        input_required({"again": {"method": "elicitation/create", "params": elicit({"type": "object"})}}),
        COMPLETE,
    )
    answers: list[Answer] = []
    policy = AnswerPolicy(elicitation=ElicitationPolicy.DEFAULTS, roots=(Root("file:///r"),))
    params = {"name": "deploy", "arguments": {"x": 1}, "_meta": {"k": "v"}}
    result = await resolve_input_required(send, params, policy, on_answer=answers.append)
    assert result == COMPLETE
    first, second, third = send.sent
    assert first == params
    assert second["name"] == "deploy" and second["arguments"] == {"x": 1} and second["_meta"] == {"k": "v"}
    assert second["requestState"] == "opaque-1"
    assert second["inputResponses"]["confirm"]["action"] == "accept"
    assert second["inputResponses"]["where"] == {"roots": [{"uri": "file:///r"}]}
    # The state of round one is not carried into round three: each retry echoes the latest result's only.
    assert "requestState" not in third
    assert third["inputResponses"] == {"again": {"action": "accept", "content": {}}}
    assert [a.method for a in answers] == ["elicitation/create", "roots/list", "elicitation/create"]


async def test_state_only_input_required_is_sent_again_without_responses() -> None:
    send = Scripted(input_required(state="busy"), COMPLETE)
    await resolve_input_required(send, {"name": "t"}, AnswerPolicy())
    assert send.sent[1] == {"name": "t", "requestState": "busy"}


async def test_the_loop_is_bounded() -> None:
    ask_again = input_required({"q": {"method": "elicitation/create", "params": elicit({})}})
    send = Scripted(*[ask_again] * 4)
    with pytest.raises(ProtocolError, match="after 3 rounds"):
        await resolve_input_required(send, {"name": "t"}, AnswerPolicy(), max_rounds=3)
    assert len(send.sent) == 4


async def test_sampling_ends_the_loop_with_a_clear_error() -> None:
    send = Scripted(input_required({"llm": {"method": "sampling/createMessage", "params": {"messages": []}}}))
    answers: list[Answer] = []
    with pytest.raises(ProtocolError, match=r"needs input mcp-run cannot give: sampling/createMessage: .*no language"):
        await resolve_input_required(send, {"name": "t"}, AnswerPolicy(), on_answer=answers.append)
    assert len(send.sent) == 1 and answers[0].refused


@pytest.mark.parametrize(
    "result",
    [
        input_required(),
        input_required(state=7),  # type: ignore[arg-type]
        {"resultType": "input_required", "inputRequests": []},
        input_required({"k": "not a request"}),
        input_required({"k": {"params": {}}}),
    ],
)
async def test_an_unreadable_input_required_result_is_an_error(result: dict[str, Any]) -> None:
    with pytest.raises(MalformedMessage):
        await resolve_input_required(Scripted(result), {"name": "t"}, AnswerPolicy())


# -- a server's policy, from the workflow and the command line -------------------------------------------


def test_roots_resolve_from_the_workflow_folder_and_keep_uris() -> None:
    roots = roots_from_config(["data", "../shared dir", "/abs/x", "file:///srv/y", "https://h/z"], "/work/flows")
    assert roots == (
        Root("file:///work/flows/data", "data"),
        Root("file:///work/shared%20dir", "shared dir"),
        Root("file:///abs/x", "x"),
        Root("file:///srv/y", "y"),
        Root("https://h/z", "z"),
    )


POLICY_FLOW = """\
version: 1
servers:
  asks:
    url: https://mcp.example/mcp
    elicitation: defaults
    roots: [data]
  plain:
    command: [python3, s.py]
steps:
  a: {server: asks, tool: t}
  b: {server: plain, tool: t}
"""


def test_each_server_gets_its_policy_and_the_command_line_wins(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(POLICY_FLOW)
    plan = validate(flow)
    asks = answer_policy(plan, "asks")
    assert asks == AnswerPolicy(ElicitationPolicy.DEFAULTS, (Root((tmp_path / "data").as_uri(), "data"),))
    assert answer_policy(plan, "plain") == AnswerPolicy()
    assert answer_policy(plan, "asks", "decline").elicitation is ElicitationPolicy.DECLINE
    assert answer_policy(plan, "plain", "defaults").elicitation is ElicitationPolicy.DEFAULTS


def test_a_tasks_input_requests_are_answered_the_same_way() -> None:
    status = {
        "taskId": "t1",
        "status": "input_required",
        "inputRequests": {"ok": {"method": "elicitation/create", "params": elicit({"type": "object"})}},
    }
    assert answer_input_requests(status, AnswerPolicy()) == {"ok": {"action": "decline"}}
    assert answer_input_requests(status, DEFAULTS) == {"ok": {"action": "accept", "content": {}}}


def test_the_new_server_settings_keep_fingerprints_unless_they_change_answers(tmp_path: Path) -> None:
    base = "version: 1\nservers:\n  s:\n    url: https://mcp.example/mcp\n{extra}steps:\n  a: {{server: s, tool: t}}\n"

    def fingerprint(extra: str) -> str:
        flow = tmp_path / "flow.yaml"
        flow.write_text(base.format(extra=extra))
        return fingerprints(validate(flow), {})["a"]

    plain = fingerprint("")
    assert fingerprint("    transport: sse\n") == plain  # how the server is reached, not what a step does
    assert fingerprint("    elicitation: defaults\n") != plain
    assert fingerprint("    roots: [data]\n") != plain


@pytest.mark.parametrize("required", [[["x"]], [{"a": 1}], [None], [3]])
def test_a_required_list_that_is_not_names_is_declined_not_a_traceback(required: list[Any]) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "default": "d"}}, "required": required}
    content, why = elicitation_defaults(schema)
    assert content is None and "cannot be read" in why
