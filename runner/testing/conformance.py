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
``auth/...``         OAuth (:mod:`.conformance_auth`): the handshake, ``tools/list``, then the first tool
                     it lists
anything else        the handshake and ``tools/list``

Exit status: 0 when the scenario's client side succeeded, 1 when it did not (the reason on stderr),
2 on a usage error. Nothing is written to stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import trio

from runner._trio import single_error
from runner.connect import HttpTarget, open_target
from runner.errors import McpRunError
from runner.session import AnswerPolicy, ElicitationPolicy, Session, SessionOptions

__all__ = ["SCENARIOS", "ScenarioFailed", "main", "run_scenario"]

SCENARIO_ENV: Final = "MCP_CONFORMANCE_SCENARIO"
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


SCENARIOS: Final[dict[str, Callable[[Session], Awaitable[None]]]] = {
    "initialize": _initialize,
    "tools_call": _tools_call,
    "sse-retry": _sse_retry,
    "elicitation-sep1034-client-defaults": _elicitation_defaults,
}


async def run_scenario(scenario: str, url: str) -> None:
    """Connect to ``url`` and do what ``scenario`` expects; raise ``ScenarioFailed`` or an
    ``McpRunError`` when that does not succeed."""
    action = SCENARIOS.get(scenario, _initialize)
    # As a user who passed --elicitation defaults (the default declines: nobody is there to answer).
    answers = AnswerPolicy(elicitation=ElicitationPolicy.DEFAULTS)
    options = SessionOptions(name="conformance", server_log_level=None, answers=answers)
    target = HttpTarget(url=url)
    if scenario.startswith("auth/"):
        from runner.testing.conformance_auth import scenario_provider

        action = _auth_scenario
        target = HttpTarget(url=url, auth=scenario_provider(scenario, url))
    with trio.fail_after(SCENARIO_TIMEOUT), single_error():
        async with open_target(target, options) as session:
            await action(session)


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
        trio.run(run_scenario, scenario, args[0])
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
