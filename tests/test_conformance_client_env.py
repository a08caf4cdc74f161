"""What ``python -m runner.testing.conformance`` takes from the suite's environment: the context (JSON
credentials for auth scenarios) and the protocol revision, handed on through their seams."""

from __future__ import annotations

import dataclasses

import pytest

from runner.session import SessionOptions
from runner.testing.conformance import ScenarioFailed, http_target, main, parse_context, session_options


def test_the_context_is_a_json_object_or_nothing() -> None:
    assert parse_context(None) == {}
    assert parse_context("  ") == {}
    context = parse_context('{"name": "auth/client-credentials-basic", "client_id": "c", "client_secret": "s"}')
    assert context["client_id"] == "c"
    with pytest.raises(ScenarioFailed, match="MCP_CONFORMANCE_CONTEXT is not valid JSON"):
        parse_context("{client_id: c}")
    with pytest.raises(ScenarioFailed, match="must be a JSON object, got list"):
        parse_context("[1]")


def test_a_bad_context_fails_the_scenario_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_CONFORMANCE_SCENARIO", "auth/client-credentials-basic")
    monkeypatch.setenv("MCP_CONFORMANCE_CONTEXT", "not json")
    assert main(["http://127.0.0.1:9/mcp"]) == 1
    assert capsys.readouterr().err.startswith("conformance auth/client-credentials-basic: MCP_CONFORMANCE_CONTEXT")


def test_the_protocol_pin_reaches_the_session_only_when_it_has_one() -> None:
    options = session_options("2026-07-28")
    names = {f.name for f in dataclasses.fields(SessionOptions)}
    if "protocol_version" in names:  # issue 13 part A: the session takes a pin
        assert dataclasses.asdict(options)["protocol_version"] == "2026-07-28"
    else:
        assert options == SessionOptions(name="conformance", server_log_level=None)
    assert session_options(None) == SessionOptions(name="conformance", server_log_level=None)


def test_the_target_is_the_scenario_url() -> None:
    target = http_target("http://localhost:1234/mcp", {"client_id": "c"})
    assert target.url == "http://localhost:1234/mcp"
    assert dict(target.headers) == {}  # no auth provider yet (issue 14)
