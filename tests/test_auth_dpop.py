"""DPoP (RFC 9449, SEP-1932): proofs on token and MCP requests, the servers' nonces, when DPoP is used.

The scripted world of :mod:`tests.auth_world` verifies every proof itself (``cryptography``: signature,
``htm``, ``htu``, ``ath``, ``nonce``, the key the token is bound to) and counts the tool calls that ran.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx2
import pytest

from runner.auth import dpop
from runner.auth.config import AuthConfig
from runner.auth.discovery import parse_challenge
from runner.auth.errors import AuthFailed
from runner.auth.fromworkflow import auth_config
from runner.auth.provider import OAuthProvider
from runner.auth.tokens import TokenCache, parse_token_response
from runner.errors import ConnectFailed, OutcomeUnknown
from runner.workflow.auth import ServerAuth
from tests.auth_world import CHALLENGE, AuthWorld, ProofError, check_proof, session_with, thumbprint
from tests.auth_world import provider as world_provider

SECRET = "s3cret-value-123"
CLIENT = AuthConfig(client_id="ci-bot", client_secret=SECRET)


def provider(world: AuthWorld, config: AuthConfig = CLIENT, secrets: list[str] | None = None) -> OAuthProvider:
    return world_provider(world, config, secrets, proof_key=dpop.ProofKey)  # a key of its own per test


def tool_calls(world: AuthWorld) -> list[str | None]:
    return [a for a, body in world.mcp_requests if isinstance(body, dict) and body.get("method") == "tools/call"]


def claims_of(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    head, body, _ = proof.split(".")
    pad = lambda t: t + "=" * (-len(t) % 4)  # noqa: E731
    return json.loads(base64.urlsafe_b64decode(pad(head))), json.loads(base64.urlsafe_b64decode(pad(body)))


# -- the proofs ----------------------------------------------------------------------------------------


def test_a_proof_names_the_request_and_verifies_with_its_public_key() -> None:
    key = dpop.ProofKey()
    proof = key.proof("post", "https://mcp.test/mcp?x=1#frag", access_token="tok-abc", nonce="n1", now=1000.0)
    header, claims = claims_of(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert "d" not in header["jwk"] and thumbprint(header["jwk"]) == key.thumbprint
    assert claims["htm"] == "POST" and claims["htu"] == "https://mcp.test/mcp" and claims["iat"] == 1000
    assert claims["ath"] == base64.urlsafe_b64encode(hashlib.sha256(b"tok-abc").digest()).rstrip(b"=").decode()
    assert claims["nonce"] == "n1" and dpop.proof_nonce(proof) == "n1"
    assert "tok-abc" not in proof
    fresh = key.proof("POST", "https://mcp.test/mcp", access_token="tok-abc")
    check_proof(fresh, "POST", "https://mcp.test/mcp", access_token="tok-abc")  # cryptography verifies it
    with pytest.raises(ProofError):
        check_proof(fresh, "GET", "https://mcp.test/mcp", access_token="tok-abc")
    assert claims_of(fresh)[1]["jti"] != claims["jti"]
    assert "jkt=" in repr(key) and "-----" not in repr(key)


def test_dpop_is_wanted_when_offered_with_es256_or_when_configured() -> None:
    offered = {"dpop_signing_alg_values_supported": ["RS256", "ES256"]}
    assert dpop.wanted(None, offered)
    assert not dpop.wanted(False, offered)
    assert not dpop.wanted(None, {})
    assert dpop.wanted(None, {}, challenged_dpop=True)  # the resource challenges with DPoP only
    assert dpop.wanted(True, {})
    assert not dpop.wanted(None, {"dpop_signing_alg_values_supported": ["RS256"]})
    with pytest.raises(AuthFailed, match="do not include ES256"):
        dpop.wanted(True, {"dpop_signing_alg_values_supported": ["RS256"]})


def test_a_workflows_auth_block_sets_dpop() -> None:
    assert auth_config(ServerAuth(client_id="c", client_secret="$S", dpop=False), {"S": "x"}).dpop is False
    assert auth_config(ServerAuth(client_id="c", client_secret="$S"), {"S": "x"}).dpop is None


def test_nonces_are_kept_per_role_and_origin() -> None:
    nonces = dpop.Nonces()
    assert nonces.take("resource", "https://mcp.test/mcp", "r1")
    assert not nonces.take("resource", "https://MCP.test/other", "r1")  # same origin, same nonce: not new
    assert nonces.get("authorization", "https://mcp.test/token") is None
    assert not nonces.take("authorization", "https://auth.test/token", "bad\nnonce")
    assert nonces.get("resource", "https://mcp.test/") == "r1"


def test_a_dpop_token_is_taken_only_after_a_proof_was_sent() -> None:
    answer = {"access_token": "a", "token_type": "DPoP"}
    assert parse_token_response(answer, dpop=True).header() == "DPoP a"
    assert parse_token_response({"access_token": "a", "token_type": "bearer"}, dpop=True).header() == "Bearer a"
    with pytest.raises(AuthFailed, match="no DPoP proof was sent"):
        parse_token_response(answer)


def test_a_dpop_challenge_is_read_and_preferred_when_asked() -> None:
    both = 'Bearer scope="a", DPoP error="use_dpop_nonce", algs="ES256"'
    assert parse_challenge(both).scheme == "bearer"
    assert parse_challenge(both, prefer="dpop").error == "use_dpop_nonce"
    only = parse_challenge('DPoP resource_metadata="https://mcp.test/.well-known/x"')
    assert only.scheme == "dpop" and only.resource_metadata == "https://mcp.test/.well-known/x"


# -- through the session and the transport ------------------------------------------------------------------


async def test_an_offered_dpop_binds_the_token_and_proves_every_request() -> None:
    world = AuthWorld(dpop_algs=["ES256"])
    secrets: list[str] = []
    auth = provider(world, secrets=secrets)
    async with session_with(world, auth) as session:
        result = await session.call_tool("echo", {"x": 1})
    assert result.text == '{"x": 1}' and world.calls_run == 1
    assert world.proof_errors == []
    [token_proof] = [c for where, c in world.proofs if where == "token"]
    assert token_proof["htu"] == "https://auth.test/token" and "ath" not in token_proof
    mcp = [c for where, c in world.proofs if where == "mcp"]
    assert len(mcp) >= 3 and len({c["jti"] for c in mcp}) == len(mcp)  # a fresh proof per request
    assert all(a is None or a.startswith("DPoP access-") for a, _ in world.mcp_requests)
    assert auth.dpop is not None and any(s.startswith("access-") for s in secrets)


async def test_a_refused_bound_token_is_refreshed_with_a_proof_of_the_same_key() -> None:
    world = AuthWorld(dpop_algs=["ES256"])
    auth = provider(world)
    async with session_with(world, auth) as session:
        await session.list_tools()
        world.revoke_access()
        await session.call_tool("echo", {})
    assert [f["grant_type"] for f in world.token_requests] == ["client_credentials", "refresh_token"]
    assert world.calls_run == 1 and world.proof_errors == []


async def test_the_authorization_servers_nonce_is_sent_on_a_second_token_request() -> None:
    world = AuthWorld(dpop_algs=["ES256"], as_nonce="as-nonce-1")
    auth = provider(world)
    async with session_with(world, auth) as session:
        await session.call_tool("echo", {})
    assert len(world.token_requests) == 2  # refused for its nonce, then issued
    assert world.proof_errors == ["token: use_dpop_nonce"]
    assert [c.get("nonce") for where, c in world.proofs if where == "token"] == ["as-nonce-1"]
    assert world.calls_run == 1


async def test_the_resources_nonce_is_sent_again_and_the_call_runs_once() -> None:
    world = AuthWorld(dpop_algs=["ES256"], rs_nonce="rs-nonce-1")
    auth = provider(world)
    async with session_with(world, auth) as session:
        await session.list_tools()
        world.rs_nonce = "rs-nonce-2"  # the server moves its nonce on between requests
        result = await session.call_tool("echo", {"n": 3})
    assert result.text == '{"n": 3}'
    assert world.calls_run == 1
    assert len(tool_calls(world)) == 2  # refused before it ran (401), sent again with the new nonce
    assert world.proof_errors == ["mcp: use_dpop_nonce", "mcp: use_dpop_nonce"]
    assert len(world.token_requests) == 1  # a nonce asks for no new token
    assert all(c["nonce"] in ("rs-nonce-1", "rs-nonce-2") for where, c in world.proofs if where == "mcp")


async def test_a_nonce_given_with_an_accepted_answer_is_used_next() -> None:
    world = AuthWorld(dpop_algs=["ES256"], rs_nonce="n1")
    auth = provider(world)
    original = world._mcp

    def rotating(request: httpx2.Request) -> httpx2.Response:
        response = original(request)
        if response.status_code == 200:  # RFC 9449 section 9: the next nonce rides on a success
            world.rs_nonce = "n2"
            response.headers["DPoP-Nonce"] = "n2"
        return response

    world._mcp = rotating  # type: ignore[method-assign]
    async with session_with(world, auth) as session:
        await session.list_tools()
        await session.call_tool("echo", {})
    assert len(tool_calls(world)) == 1 and world.calls_run == 1  # no refusal: it carried n2 already
    assert [c["nonce"] for where, c in world.proofs if where == "mcp"][-1] == "n2"


async def test_a_server_refusing_the_nonce_it_gave_fails_the_call_as_not_sent() -> None:
    world = AuthWorld(dpop_algs=["ES256"], rs_nonce="n")
    auth = provider(world)
    async with session_with(world, auth) as session:
        await session.list_tools()
        world.rs_nonce_stuck = True
        with pytest.raises(ConnectFailed, match="refuses the DPoP nonce it gave") as caught:
            await session.call_tool("echo", {})
    assert not isinstance(caught.value, OutcomeUnknown) and not caught.value.written
    assert world.calls_run == 0
    assert len(tool_calls(world)) == 1  # it carried the nonce already: no second try


async def test_a_nonce_challenge_without_a_nonce_fails_as_not_sent() -> None:
    world = AuthWorld(dpop_algs=["ES256"])
    auth = provider(world)
    async with session_with(world, auth) as session:
        await session.list_tools()
        world.rs_nonce, world.rs_nonce_stuck = "", True  # use_dpop_nonce, but an empty DPoP-Nonce
        with pytest.raises(ConnectFailed, match="gives none") as caught:
            await session.call_tool("echo", {})
    assert not caught.value.written and world.calls_run == 0


async def test_no_dpop_unless_offered_or_configured() -> None:
    world = AuthWorld()
    auth = provider(world)
    async with session_with(world, auth) as session:
        await session.call_tool("echo", {})
    assert "dpop" not in world.token_headers[0] and auth.dpop is None
    assert all(a is None or a.startswith("Bearer ") for a, _ in world.mcp_requests)

    disabled = AuthWorld(dpop_algs=["ES256"])
    auth = provider(disabled, AuthConfig(client_id="ci-bot", client_secret=SECRET, dpop=False))
    async with session_with(disabled, auth) as session:
        await session.call_tool("echo", {})
    assert "dpop" not in disabled.token_headers[0] and disabled.calls_run == 1


async def test_a_resource_challenging_with_dpop_only_gets_dpop_without_metadata_saying_so() -> None:
    world = AuthWorld(dpop_challenge=True)
    auth = provider(world)
    async with session_with(world, auth) as session:
        await session.call_tool("echo", {})
    assert "dpop" in world.token_headers[0] and world.calls_run == 1
    assert world.proof_errors == []


async def test_forced_dpop_against_an_unsigning_server_names_the_algorithms() -> None:
    world = AuthWorld(dpop_algs=["RS256"])
    auth = provider(world, AuthConfig(client_id="ci-bot", client_secret=SECRET, dpop=True))
    with pytest.raises(ConnectFailed, match="do not include ES256"):
        async with session_with(world, auth):
            pass
    assert world.token_requests == []


async def test_a_bound_token_is_not_taken_from_the_cache_by_a_server_that_says_dpop_false() -> None:
    """One process, one client and resource: a server with ``dpop: true`` caches a DPoP-bound token; another
    with ``dpop: false`` asks for its own Bearer token rather than sending the bound one (and the reverse)."""
    world = AuthWorld(dpop_algs=["ES256"])
    cache = TokenCache()
    found = []
    for setting in (True, False, True, False):
        config = AuthConfig(client_id="ci-bot", client_secret=SECRET, dpop=setting)
        auth = world_provider(world, config, cache=cache, proof_key=dpop.run_key)
        await auth.challenged(401, CHALLENGE, {})
        found.append((auth.header() or "").split()[0])
    assert found == ["DPoP", "Bearer", "DPoP", "Bearer"]
    assert len(world.token_requests) == 2
