"""The client the MCP conformance suite drives: ``python -m runner.testing.conformance URL``.

The suite (npm ``@modelcontextprotocol/conformance``, see scripts/conformance.sh) starts a mock server for
one scenario, runs this command with the server's URL appended and the scenario's name in the
environment variable ``MCP_CONFORMANCE_SCENARIO``, then judges what the mock server saw. This client
uses mcp-run's own session and Streamable HTTP transport (:func:`runner.connect.open_target`), exactly
as a workflow does, and does what each scenario expects:

``initialize``       the handshake, then ``tools/list``
``tools_call``       ``tools/list``, then ``add_numbers`` with ``{"a": 5, "b": 3}``
``sse-retry``        ``tools/list``, then ``test_reconnection``, whose stream the server closes before the
                     result: the transport waits the server's ``retry:`` and resumes by GET with
                     ``Last-Event-ID``
``elicitation-sep1034-client-defaults``
                     calls ``test_client_elicitation_defaults``; the client runs as with
                     ``--elicitation defaults``, so the server's ``elicitation/create`` is accepted with the
                     schema's default values (SEP-1034, :mod:`runner.session.answers`)
``json-schema-2020-12-preservation``
                     ``tools/list``, then ``json_schema_echo`` with the focal tool's ``inputSchema``
                     exactly as the server sent it (``{"schema": ...}``): the suite checks that
                     ``$schema``, ``$defs``, ``additionalProperties`` and the composition, conditional and
                     ``$anchor`` keywords survived mcp-run's parsing
``auth/...``         OAuth (:mod:`.conformance_auth`): the handshake, ``tools/list``, then the first tool
                     it lists
``http-invalid-tool-headers``
                     calls every tool mcp-run kept (those with invalid ``x-mcp-header`` markings are dropped)
``sep-2322-client-request-state``
                     the four ``test_mrtr_*`` tools: ``input_required`` answered and sent again
anything else        the handshake and ``tools/list``

Then, whatever the scenario, each call of the context's ``toolCalls`` list (``{"name", "arguments"}``; the
suite lists them for ``http-custom-headers``), in order, each one a failure if the tool is missing or errs.

The suite also sets ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (the revision the scenario runs at) and, for
auth scenarios, ``MCP_CONFORMANCE_CONTEXT`` (JSON: the scenario's name and credentials). The version is
handed to the session as its protocol pin (:func:`session_options`: only once the session offers one, until
then the session speaks the version it knows); the context is parsed (:func:`parse_context`) and handed to
:func:`http_target`, the one place an auth provider will use it.

Exit status: 0 when the scenario's client side succeeded, 1 when it did not (the reason on stderr),
2 on a usage error. Nothing is written to stdout.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import trio

from runner._trio import single_error
from runner.connect import HttpTarget, open_target
from runner.errors import McpRunError
from runner.protocol.versions import PROTOCOL_CHOICES
from runner.session import AnswerPolicy, ElicitationPolicy, Session, SessionOptions

__all__ = [
    "SCENARIOS",
    "ScenarioFailed",
    "http_target",
    "main",
    "parse_context",
    "run_scenario",
    "session_options",
]

SCENARIO_ENV: Final = "MCP_CONFORMANCE_SCENARIO"
PROTOCOL_ENV: Final = "MCP_CONFORMANCE_PROTOCOL_VERSION"
CONTEXT_ENV: Final = "MCP_CONFORMANCE_CONTEXT"
SCHEMA_TOOL: Final = "json_schema_2020_12_tool"
ECHO_TOOL: Final = "json_schema_echo"
#: Bound on one scenario: the suite's own default timeout is 30 s.
SCENARIO_TIMEOUT: Final = 25.0


class ScenarioFailed(Exception):
    """The scenario's client side did not succeed; the message says why."""


async def _list_tools(session: Session) -> list[str]:
    return [tool.name for tool in await session.list_tools()]


async def _call(session: Session, tool: str, arguments: dict[str, object]) -> str:
    names = await _list_tools(session)
    if tool not in names:
        raise ScenarioFailed(f"the server does not offer the tool {tool!r} (it offers {', '.join(names) or 'none'})")
    result = await session.call_tool(tool, arguments, timeout=SCENARIO_TIMEOUT)
    if result.is_error:
        raise ScenarioFailed(f"{tool} returned a tool error: {result.text}")
    return result.text


async def _initialize(session: Session) -> None:
    await _list_tools(session)


async def _tools_call(session: Session) -> None:
    text = await _call(session, "add_numbers", {"a": 5, "b": 3})
    if "8" not in text:
        raise ScenarioFailed(f"add_numbers(5, 3) answered {text!r}")


async def _sse_retry(session: Session) -> None:
    await _call(session, "test_reconnection", {})


async def _elicitation_defaults(session: Session) -> None:
    text = await _call(session, "test_client_elicitation_defaults", {})
    if not text.startswith("Elicitation completed"):
        raise ScenarioFailed(f"the elicitation was not accepted with its defaults; the server said: {text}")


def _sample(schema: object) -> object:
    """A value that fits a property's schema (its default, first enum member, or a plain value of its type)."""
    if not isinstance(schema, dict):
        return "test"
    if "default" in schema:
        return schema["default"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    samples: dict[object, object] = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    return samples.get(kind, "test")


async def _every_tool(session: Session) -> None:
    """Call every tool the session kept (2026-07-28 drops tools whose x-mcp-header markings are invalid), each
    with a value for every required parameter."""
    for tool in await session.list_tools():
        schema = tool.raw.get("inputSchema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        required = schema.get("required") if isinstance(schema, dict) else None
        arguments: dict[str, object] = {}
        if isinstance(properties, dict) and isinstance(required, list):
            arguments = {name: _sample(properties.get(name)) for name in required if isinstance(name, str)}
        await session.call_tool(tool.name, arguments, timeout=SCENARIO_TIMEOUT)


async def _input_required(session: Session) -> None:
    """The multi-round-trip tools of SEP-2322: each answered by the policy and sent again (with the request state
    echoed only when there was one); an unrelated call between them carries neither."""
    expected = {
        "test_mrtr_echo_state": "echo-state-ok",
        "test_mrtr_unrelated": "unrelated-ok",
        "test_mrtr_no_state": "no-state-ok",
        "test_mrtr_no_result_type": "no-result-type-test-ok",
    }
    for tool, text in expected.items():
        answer = await _call(session, tool, {})
        if answer != text:
            raise ScenarioFailed(f"{tool} answered {answer!r}, not {text!r}")


async def _schema_preservation(session: Session) -> None:
    tools = {tool.name: tool for tool in await session.list_tools()}
    for needed in (SCHEMA_TOOL, ECHO_TOOL):
        if needed not in tools:
            offered = ", ".join(tools) or "none"
            raise ScenarioFailed(f"the server does not offer the tool {needed!r} (it offers {offered})")
    schema = tools[SCHEMA_TOOL].raw.get("inputSchema")  # as sent, not the parsed copy
    if not isinstance(schema, dict):
        raise ScenarioFailed(f"{SCHEMA_TOOL} has no inputSchema object")
    result = await session.call_tool(ECHO_TOOL, {"schema": schema}, timeout=SCENARIO_TIMEOUT)
    if result.is_error:
        raise ScenarioFailed(f"{ECHO_TOOL} returned a tool error: {result.text}")


async def _context_calls(session: Session, context: Mapping[str, Any]) -> None:
    calls = context.get("toolCalls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise ScenarioFailed(f"{CONTEXT_ENV}: toolCalls must be a list")
    for call in calls:
        name = call.get("name") if isinstance(call, dict) else None
        arguments = (call.get("arguments") or {}) if isinstance(call, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise ScenarioFailed(f"{CONTEXT_ENV}: a tool call needs a name and an arguments object: {call!r:.200}")
        await _call(session, name, arguments)


SCENARIOS: Final[dict[str, Callable[[Session], Awaitable[None]]]] = {
    "initialize": _initialize,
    "tools_call": _tools_call,
    "sse-retry": _sse_retry,
    "elicitation-sep1034-client-defaults": _elicitation_defaults,
    "json-schema-2020-12-preservation": _schema_preservation,
    "http-invalid-tool-headers": _every_tool,
    "sep-2322-client-request-state": _input_required,
}


def parse_context(text: str | None) -> dict[str, Any]:
    """``MCP_CONFORMANCE_CONTEXT`` as an object ({} when unset); ``ScenarioFailed`` when it is not a JSON
    object."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ScenarioFailed(f"{CONTEXT_ENV} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ScenarioFailed(f"{CONTEXT_ENV} must be a JSON object, got {type(value).__name__}")
    return value


def session_options(protocol_version: str | None) -> SessionOptions:
    """The session's options: as a user who passed ``--elicitation defaults`` (the default declines: nobody is
    there to answer), and pinned to ``protocol_version`` (``MCP_CONFORMANCE_PROTOCOL_VERSION``) when it names a
    revision mcp-run speaks; else ``auto``."""
    answers = AnswerPolicy(elicitation=ElicitationPolicy.DEFAULTS)
    pin = protocol_version if protocol_version in PROTOCOL_CHOICES else "auto"
    return SessionOptions(name="conformance", server_log_level=None, answers=answers, protocol=pin)


def http_target(url: str, scenario: str) -> HttpTarget:
    """Where the scenario's server is, and how to reach it: an ``auth/...`` scenario gets an OAuth provider
    built from ``MCP_CONFORMANCE_CONTEXT`` (:mod:`.conformance_auth`)."""
    if scenario.startswith("auth/"):
        from runner.testing.conformance_auth import scenario_provider

        return HttpTarget(url=url, auth=scenario_provider(scenario, url))
    return HttpTarget(url=url)


async def run_scenario(
    scenario: str,
    url: str,
    *,
    protocol_version: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> None:
    """Connect to ``url`` and do what ``scenario`` expects; raise ``ScenarioFailed`` or an
    ``McpRunError`` when that does not succeed."""
    action = SCENARIOS.get(scenario, _initialize)
    if scenario.startswith("auth/"):
        action = _auth_scenario
    options = session_options(protocol_version)
    target = http_target(url, scenario)
    with trio.fail_after(SCENARIO_TIMEOUT), single_error():
        async with open_target(target, options) as session:
            await action(session)
            await _context_calls(session, context or {})


async def _auth_scenario(session: Session) -> None:
    names = await _list_tools(session)
    if names:
        await session.call_tool(names[0], {}, timeout=SCENARIO_TIMEOUT)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(
            f"usage: python -m runner.testing.conformance SERVER_URL  (the scenario in ${SCENARIO_ENV})",
            file=sys.stderr,
        )
        return 2
    scenario = os.environ.get(SCENARIO_ENV, "initialize")
    try:
        context = parse_context(os.environ.get(CONTEXT_ENV))
        version = os.environ.get(PROTOCOL_ENV) or None
        trio.run(lambda: run_scenario(scenario, args[0], protocol_version=version, context=context))
    except ScenarioFailed as exc:
        print(f"conformance {scenario}: {exc}", file=sys.stderr)
        return 1
    except trio.TooSlowError:
        print(f"conformance {scenario}: no outcome within {SCENARIO_TIMEOUT:g} s", file=sys.stderr)
        return 1
    except McpRunError as exc:
        print(f"conformance {scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
