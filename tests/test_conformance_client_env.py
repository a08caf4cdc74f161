"""What ``python -m runner.testing.conformance`` takes from the suite's environment: the context (JSON
credentials for auth scenarios) and the protocol revision, handed on through their seams."""

from __future__ import annotations

import pytest

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


def test_the_protocol_pin_reaches_the_session() -> None:
    assert session_options("2026-07-28").protocol == "2026-07-28"
    assert session_options("2025-11-25").protocol == "2025-11-25"
    assert session_options(None).protocol == "auto"
    assert session_options("1999-01-01").protocol == "auto"  # not one mcp-run speaks: negotiate
    assert session_options(None).answers.client_capabilities() == {"elicitation": {"form": {}}}


def test_the_target_is_the_scenario_url() -> None:
    target = http_target("http://localhost:1234/mcp", "tools_call")
    assert target.url == "http://localhost:1234/mcp"
    assert dict(target.headers) == {} and target.auth is None


def test_an_auth_scenario_gets_a_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_CONFORMANCE_CONTEXT", '{"client_id": "c", "client_secret": "s3cret-value"}')
    target = http_target("http://localhost:1234/mcp", "auth/client-credentials-basic")
    assert target.auth is not None


def test_the_enterprise_scenario_gets_the_enterprise_grant() -> None:
    from runner.auth.provider import OAuthProvider
    from runner.testing.conformance_auth import scenario_provider

    context = (
        '{"client_id": "xaa", "client_secret": "xaa-secret", "idp_client_id": "at-idp", "idp_id_token": "eyJ.id.t",'
        ' "idp_issuer": "http://localhost:1/", "idp_token_endpoint": "http://localhost:1/token"}'
    )
    provider = scenario_provider(
        "auth/enterprise-managed-authorization",
        "http://localhost:2/mcp",
        {"MCP_CONFORMANCE_CONTEXT": context},
    )
    assert isinstance(provider, OAuthProvider)
    config = provider.config
    assert (config.grant, config.client_id, config.client_secret) == ("enterprise", "xaa", "xaa-secret")
    assert (config.id_token, config.idp_client_id, config.idp_token_url) == (
        "eyJ.id.t",
        "at-idp",
        "http://localhost:1/token",
    )
