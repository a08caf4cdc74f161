"""``python -m runner.testing.conformance`` against the official SDK server (the conformance suite itself runs in
scripts/conformance.sh): scenarios that fit the server succeed, the others fail with a reason, and the
command line writes nothing to stdout."""

from __future__ import annotations

import pytest
import trio

from runner.testing.conformance import ScenarioFailed, main, run_scenario
from tests.integration.peers import sdk_http_server

pytestmark = pytest.mark.integration


async def test_initialize_scenario_against_the_sdk_server() -> None:
    with trio.fail_after(60):
        async with sdk_http_server() as server:
            await run_scenario("initialize", server.url)
            await run_scenario("some-future-scenario", server.url)  # unknown: handshake and tools/list


async def test_a_scenario_whose_tool_is_missing_fails_with_the_reason() -> None:
    with trio.fail_after(60):
        async with sdk_http_server() as server:
            with pytest.raises(ScenarioFailed, match=r"does not offer the tool 'add_numbers'.*echo"):
                await run_scenario("tools_call", server.url)


def test_main_reports_on_stderr_only(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MCP_CONFORMANCE_SCENARIO", "initialize")
    assert main(["http://user:secret@127.0.0.1:9/mcp"]) == 1  # refused before connecting
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("conformance initialize: ConnectFailed: ") and "secret" not in err
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


async def test_the_context_tool_calls_are_made_in_order() -> None:
    with trio.fail_after(60):
        async with sdk_http_server() as server:
            calls = [{"name": "echo", "arguments": {"text": "hi"}}, {"name": "add", "arguments": {"a": 1, "b": 2}}]
            await run_scenario("http-custom-headers", server.url, context={"toolCalls": calls})
            with pytest.raises(ScenarioFailed, match="does not offer the tool 'test_custom_headers'"):
                await run_scenario("x", server.url, context={"toolCalls": [{"name": "test_custom_headers"}]})
            with pytest.raises(ScenarioFailed, match=r"fail returned a tool error: .*boom"):
                await run_scenario(
                    "x", server.url, context={"toolCalls": [{"name": "fail", "arguments": {"message": "boom"}}]}
                )
            with pytest.raises(ScenarioFailed, match="needs a name and an arguments object"):
                await run_scenario("x", server.url, context={"toolCalls": [{"arguments": {}}]})


async def test_schema_preservation_needs_the_scenario_tools() -> None:
    with trio.fail_after(60):
        async with sdk_http_server() as server:
            with pytest.raises(ScenarioFailed, match="does not offer the tool 'json_schema_2020_12_tool'"):
                await run_scenario("json-schema-2020-12-preservation", server.url, protocol_version="2025-11-25")
