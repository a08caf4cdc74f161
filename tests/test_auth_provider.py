"""OAuth through the real session and Streamable HTTP transport, against the scripted world of
:mod:`tests.auth_world` (an authorization server and a protected MCP server on ``httpx2.MockTransport``)."""

from __future__ import annotations

import base64
from typing import Any

import httpx2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from runner.auth.config import AuthConfig
from runner.auth.errors import AuthFailed
from runner.auth.provider import OAuthProvider
from runner.auth.tokens import Token, TokenCache
from runner.errors import ConnectFailed, OutcomeUnknown
from runner.exitcodes import ExitCode
from runner.transports.http.transport import HttpParams
from tests.auth_world import CHALLENGE, ISSUER, MCP_URL, AuthWorld, provider, session_with

SECRET = "s3cret-value-123"


def pem(key: Any) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


async def test_client_secret_basic_discovers_and_calls() -> None:
    world = AuthWorld()
    secrets: list[str] = []
    auth = provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET), secrets)
    async with session_with(world, auth) as session:
        result = await session.call_tool("echo", {"x": 1})
    assert result.text == '{"x": 1}'
    assert world.calls_run == 1
    [form] = world.token_requests
    assert form == {"grant_type": "client_credentials", "resource": MCP_URL, "scope": "mcp:read"}
    basic = world.token_headers[0]["authorization"]
    assert base64.b64decode(basic[6:]).decode() == f"ci-bot:{SECRET}"
    assert world.mcp_requests[0][0] is None  # the first request had no token: 401, then discovery
    assert auth.issuer == ISSUER
    assert any(s.startswith("access-") for s in secrets)


async def test_client_secret_post_and_configured_scopes() -> None:
    world = AuthWorld()
    config = AuthConfig(client_id="ci-bot", client_secret=SECRET, auth_method="client_secret_post", scopes=["a", "b"])
    async with session_with(world, provider(world, config)) as session:
        await session.list_tools()
    [form] = world.token_requests
    assert form["client_secret"] == SECRET and form["client_id"] == "ci-bot"
    assert form["scope"] == "a b"
    assert "authorization" not in world.token_headers[0]


@pytest.mark.parametrize("kind", ["ES256", "RS256"])
async def test_private_key_jwt(kind: str) -> None:
    key = ec.generate_private_key(ec.SECP256R1()) if kind == "ES256" else rsa.generate_private_key(65537, 2048)
    world = AuthWorld(public_keys={"signer": key.public_key()})
    secrets: list[str] = []
    auth = provider(world, AuthConfig(client_id="signer", private_key=pem(key)), secrets)
    async with session_with(world, auth) as session:
        await session.call_tool("echo", {})
    [form] = world.token_requests
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    import jwt

    assert jwt.get_unverified_header(form["client_assertion"])["alg"] == kind
    assert form["client_assertion"] in secrets


async def test_jwt_bearer_with_a_workload_token() -> None:
    world = AuthWorld(workload_tokens={"eyJ.workload.token"})
    config = AuthConfig(grant="jwt_bearer", assertion="eyJ.workload.token")
    async with session_with(world, provider(world, config)) as session:
        await session.call_tool("echo", {})
    [form] = world.token_requests
    assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert form["assertion"] == "eyJ.workload.token"


async def test_github_actions_oidc_token_is_fetched_with_the_audience() -> None:
    world = AuthWorld(workload_tokens={"gh-oidc-jwt"})
    seen: list[httpx2.Request] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.host == "gh.test":
            seen.append(request)
            return httpx2.Response(200, json={"value": "gh-oidc-jwt"})
        return await world.handler(request)

    env = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://gh.test/token?x=1", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "req-tok"}
    auth = provider(handler, AuthConfig(grant="jwt_bearer", github_audience="api://mcp"), environ=env)
    async with session_with(world, auth) as session:
        await session.list_tools()
    assert seen[0].url.params["audience"] == "api://mcp"
    assert seen[0].headers["authorization"] == "Bearer req-tok"


async def test_a_refused_token_is_refreshed_once_and_the_call_runs_once() -> None:
    world = AuthWorld()
    auth = provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET))
    async with session_with(world, auth) as session:
        await session.list_tools()
        world.revoke_access()  # the token expired on the server's side
        result = await session.call_tool("echo", {"n": 2})
    assert result.text == '{"n": 2}'
    assert world.calls_run == 1
    assert [f["grant_type"] for f in world.token_requests] == ["client_credentials", "refresh_token"]
    calls = [a for a, body in world.mcp_requests if isinstance(body, dict) and body.get("method") == "tools/call"]
    assert len(calls) == 2 and calls[0] != calls[1]  # refused with the old token, run with the new one


async def test_a_server_that_refuses_every_token_fails_as_not_sent() -> None:
    world = AuthWorld(always_reject=True)
    auth = provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET))
    with pytest.raises(ConnectFailed) as caught:
        async with session_with(world, auth):
            pass
    assert not isinstance(caught.value, OutcomeUnknown)
    assert caught.value.exit_code == ExitCode.UNREACHABLE
    assert len(world.token_requests) <= 3
    assert SECRET not in str(caught.value) and "access-" not in str(caught.value)


async def test_tool_call_refused_by_the_auth_hook_is_never_in_doubt() -> None:
    world = AuthWorld()
    auth = provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET))
    async with session_with(world, auth) as session:
        await session.list_tools()
        world.always_reject = True
        with pytest.raises(ConnectFailed) as caught:
            await session.call_tool("echo", {})
    assert not isinstance(caught.value, OutcomeUnknown)
    assert not caught.value.written
    assert world.calls_run == 0


async def test_insufficient_scope_steps_up() -> None:
    world = AuthWorld(call_scope="mcp:write")
    auth = provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET))
    async with session_with(world, auth) as session:
        await session.call_tool("echo", {})
    assert world.calls_run == 1
    assert [f.get("scope") for f in world.token_requests] == ["mcp:read", "mcp:read mcp:write"]


async def test_step_up_stops_at_its_limit() -> None:
    world = AuthWorld(call_scope="never-granted")
    world.clients["ci-bot"] = SECRET

    auth = provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET, step_up_limit=2))
    original = world._issue

    def stingy(scope: set[str], client_id: str | None, jkt: str | None = None) -> httpx2.Response:
        return original(scope - {"never-granted"}, client_id, jkt)

    world._issue = stingy  # type: ignore[method-assign]
    async with session_with(world, auth) as session:
        with pytest.raises(AuthFailed, match="insufficient_scope"):
            await session.call_tool("echo", {})
    assert world.calls_run == 0
    assert len(world.token_requests) == 3  # the first token, then two step-ups


async def test_resource_mismatch_sends_no_token_request() -> None:
    world = AuthWorld(resource="https://other.test/mcp")
    with pytest.raises(ConnectFailed, match="not this server"):
        async with session_with(world, provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET))):
            pass
    assert world.token_requests == []


async def test_issuer_mismatch_is_refused() -> None:
    world = AuthWorld(issuer_in_metadata="https://evil.test")
    with pytest.raises(ConnectFailed, match="issuer"):
        async with session_with(world, provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET))):
            pass
    assert world.token_requests == []


async def test_plain_http_token_endpoint_is_refused() -> None:
    world = AuthWorld(token_endpoint="http://auth.test/token")
    with pytest.raises(ConnectFailed, match="https"):
        async with session_with(world, provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET))):
            pass
    assert world.token_requests == []


async def test_a_wrong_secret_is_reported_without_the_secret() -> None:
    world = AuthWorld()
    with pytest.raises(ConnectFailed) as caught:
        async with session_with(world, provider(world, AuthConfig(client_id="ci-bot", client_secret="wrong-one-42"))):
            pass
    assert "invalid_client" in str(caught.value)
    assert "wrong-one-42" not in str(caught.value) and "wrong-one-42" not in repr(caught.value)


async def test_sessions_share_the_token_cache() -> None:
    world = AuthWorld()
    cache = TokenCache()
    config = AuthConfig(client_id="ci-bot", client_secret=SECRET)
    for _ in range(2):
        auth = provider(world, config, cache=cache)
        async with session_with(world, auth) as session:
            await session.list_tools()
    assert len(world.token_requests) == 1


class KeyRecordingCache(TokenCache):
    """A token cache that remembers every key it was given a token under."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[tuple[str, str, str]] = []

    def put(self, issuer: str, client_id: str, resource: str, token: Token) -> None:
        self.keys.append((issuer, client_id, resource))
        super().put(issuer, client_id, resource, token)


async def test_workloads_with_different_assertions_do_not_share_a_cached_token() -> None:
    """Two workflows (or two runs in one process) with the jwt-bearer grant, for the same client and server
    but different workload tokens (different subjects): each gets its own token; the same one again reuses it.
    The cache's keys hold a digest of the assertion, never the assertion."""
    world = AuthWorld(workload_tokens={"eyJ.workload-a.sig", "eyJ.workload-b.sig"})
    cache = KeyRecordingCache()
    headers = []
    for assertion in ("eyJ.workload-a.sig", "eyJ.workload-b.sig", "eyJ.workload-a.sig"):
        config = AuthConfig(grant="jwt_bearer", client_id="ci-bot", assertion=assertion)
        auth = provider(world, config, cache=cache)
        await auth.challenged(401, CHALLENGE, {})
        headers.append(auth.header())
    assert [f["assertion"] for f in world.token_requests] == ["eyJ.workload-a.sig", "eyJ.workload-b.sig"]
    assert headers[0] == headers[2] != headers[1]
    assert len(set(cache.keys)) == 2
    assert not any("workload" in part for key in cache.keys for part in key)


async def test_github_audiences_do_not_share_a_cached_token() -> None:
    world = AuthWorld(workload_tokens={"gh-jwt-for-api://a", "gh-jwt-for-api://b"})

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.host == "gh.test":
            return httpx2.Response(200, json={"value": f"gh-jwt-for-{request.url.params['audience']}"})
        return await world.handler(request)

    env = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://gh.test/token", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "req-tok"}
    cache = TokenCache()
    for audience in ("api://a", "api://b", "api://a"):
        config = AuthConfig(grant="jwt_bearer", github_audience=audience)
        auth = provider(handler, config, cache=cache, environ=env)
        await auth.challenged(401, CHALLENGE, {})
    assert [f["assertion"] for f in world.token_requests] == ["gh-jwt-for-api://a", "gh-jwt-for-api://b"]


def test_repr_shows_no_secret() -> None:
    config = AuthConfig(client_id="ci-bot", client_secret=SECRET, assertion="eyJ.a.b")
    assert SECRET not in repr(config) and "eyJ.a.b" not in repr(config)
    params = HttpParams(MCP_URL, auth=OAuthProvider(MCP_URL, config))
    assert SECRET not in repr(params)


def test_an_authorization_header_cannot_be_configured_with_oauth() -> None:
    with pytest.raises(ConnectFailed, match="Authorization"):
        HttpParams(MCP_URL, headers={"Authorization": "Bearer x"}, auth=OAuthProvider(MCP_URL, AuthConfig()))
