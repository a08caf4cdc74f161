"""The enterprise grant (SEP-990): the IdP's token exchange, then the jwt-bearer grant, against scripted fakes.

The MCP server and its authorization server are :mod:`tests.auth_world`'s; :class:`Idp` adds an enterprise
IdP (``https://idp.test``) whose token endpoint checks the token exchange's form and issues an ID-JAG that
the authorization server then accepts as a jwt-bearer assertion.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import httpx2
import pytest

from runner.auth.config import AuthConfig
from runner.auth.enterprise import ID_JAG, ID_TOKEN, TOKEN_EXCHANGE
from runner.auth.errors import AuthFailed
from runner.auth.fromworkflow import auth_config, auth_secrets
from runner.auth.provider import JWT_BEARER
from runner.auth.tokens import TokenCache
from runner.workflow.auth import ServerAuth
from tests.auth_world import CHALLENGE, ISSUER, MCP_URL, AuthWorld, provider, session_with

SECRET = "s3cret-value-123"
ID_TOKEN_VALUE = "eyJ.id-token-of-alice.sig"
IDP = "https://idp.test"


@dataclass
class Idp:
    """An enterprise IdP in front of ``world``: its ID-JAGs are what ``world``'s jwt-bearer grant accepts."""

    world: AuthWorld
    answer: tuple[int, Any] | None = None  # a scripted answer instead of an ID-JAG
    metadata_issuer: str = IDP
    requests: list[dict[str, str]] = field(default_factory=list)
    metadata_reads: list[str] = field(default_factory=list)

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host != "idp.test":
            return await self.world.handler(request)
        if request.method == "GET":
            self.metadata_reads.append(request.url.path)
            if request.url.path == "/.well-known/openid-configuration":
                return httpx2.Response(200, json={"issuer": self.metadata_issuer, "token_endpoint": f"{IDP}/oauth2/t"})
            return httpx2.Response(404)
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        self.requests.append(form)
        if self.answer is not None:
            return httpx2.Response(self.answer[0], json=self.answer[1])
        jag = f"id-jag-{len(self.requests)}-for-{form.get('audience')}"
        self.world.workload_tokens.add(jag)
        return httpx2.Response(200, json={"access_token": jag, "issued_token_type": ID_JAG, "token_type": "N_A"})


def enterprise(**overrides: Any) -> AuthConfig:
    settings: dict[str, Any] = {
        "grant": "enterprise",
        "client_id": "ci-bot",
        "client_secret": SECRET,
        "id_token": ID_TOKEN_VALUE,
        "idp_token_url": f"{IDP}/token",
        "idp_client_id": "agent-at-idp",
    }
    settings.update(overrides)
    return AuthConfig(**settings)


async def test_the_id_token_becomes_an_id_jag_then_an_access_token() -> None:
    idp = Idp(AuthWorld())
    secrets: list[str] = []
    async with session_with(idp, provider(idp, enterprise(), secrets)) as session:
        result = await session.call_tool("echo", {"x": 1})
    assert result.text == '{"x": 1}' and idp.world.calls_run == 1
    [exchange] = idp.requests
    assert exchange == {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "audience": ISSUER,  # the MCP server's authorization server, as its metadata names it
        "resource": MCP_URL,
        "scope": "mcp:read",
        "subject_token": ID_TOKEN_VALUE,
        "subject_token_type": ID_TOKEN,
        "client_id": "agent-at-idp",
    }
    [grant] = idp.world.token_requests
    assert grant == {
        "grant_type": JWT_BEARER,
        "assertion": f"id-jag-1-for-{ISSUER}",
        "resource": MCP_URL,
        "scope": "mcp:read",
    }
    basic = idp.world.token_headers[0]["authorization"]
    assert base64.b64decode(basic[6:]).decode() == f"ci-bot:{SECRET}"  # its own client at the server's AS
    assert ID_TOKEN_VALUE in secrets and f"id-jag-1-for-{ISSUER}" in secrets
    assert any(s.startswith("access-") for s in secrets)


async def test_an_idp_client_secret_goes_in_the_body_and_is_masked() -> None:
    idp = Idp(AuthWorld())
    secrets: list[str] = []
    auth = provider(idp, enterprise(idp_client_secret="idp-secret-456"), secrets)
    async with session_with(idp, auth) as session:
        await session.list_tools()
    assert idp.requests[0]["client_id"] == "agent-at-idp"
    assert idp.requests[0]["client_secret"] == "idp-secret-456"
    assert "idp-secret-456" in secrets


async def test_the_idp_token_endpoint_is_found_from_its_issuer() -> None:
    idp = Idp(AuthWorld())
    auth = provider(idp, enterprise(idp_token_url=None, idp_issuer=IDP))
    async with session_with(idp, auth) as session:
        await session.list_tools()
    assert idp.metadata_reads == ["/.well-known/openid-configuration"]
    assert len(idp.requests) == 1


async def test_idp_metadata_naming_another_issuer_is_refused() -> None:
    idp = Idp(AuthWorld(), metadata_issuer="https://evil.test")
    auth = provider(idp, enterprise(idp_token_url=None, idp_issuer=IDP))
    with pytest.raises(AuthFailed, match=r"the IdP's metadata names the issuer 'https://evil.test'"):
        await auth.challenged(401, CHALLENGE, None)
    assert idp.requests == []


async def test_an_idp_refusal_says_what_the_idp_said_and_not_what_was_sent() -> None:
    idp = Idp(AuthWorld(), answer=(400, {"error": "invalid_grant", "error_description": "ID token expired"}))
    auth = provider(idp, enterprise())
    with pytest.raises(AuthFailed) as info:
        await auth.challenged(401, CHALLENGE, None)
    message = str(info.value)
    assert message == "the IdP refused the token exchange for an ID-JAG (400, invalid_grant: ID token expired)"
    assert idp.world.token_requests == []  # no jwt-bearer grant without an ID-JAG


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"access_token": "tok", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"},
            "not an ID-JAG",
        ),
        ({"issued_token_type": ID_JAG}, "has no access_token"),
        (["not", "an", "object"], "is not a JSON object"),
    ],
)
async def test_an_answer_that_is_not_an_id_jag_is_refused(answer: Any, message: str) -> None:
    idp = Idp(AuthWorld(), answer=(200, answer))
    with pytest.raises(AuthFailed, match=message):
        await provider(idp, enterprise()).challenged(401, CHALLENGE, None)
    assert idp.world.token_requests == []


async def test_an_id_jag_the_authorization_server_refuses_fails_the_grant() -> None:
    world = AuthWorld()
    idp = Idp(world)
    world.workload_tokens = set()  # the authorization server trusts no ID-JAG

    async def refusing(request: httpx2.Request) -> httpx2.Response:
        response = await Idp.handler(idp, request)
        world.workload_tokens.clear()
        return response

    auth = provider(refusing, enterprise())
    with pytest.raises(AuthFailed, match=r"the token endpoint refused \(400, invalid_grant\)"):
        await auth.challenged(401, CHALLENGE, None)
    assert len(idp.requests) == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"client_id": None}, "needs the client id registered with the authorization server"),
        ({"id_token": None}, r"needs the ID token from the IdP sign-in \(auth: id_token\)"),
        ({"idp_token_url": None}, r"needs the IdP's token endpoint \(auth: idp_token_url or idp_issuer\)"),
        ({"idp_token_url": "http://idp.test/token"}, "must use https"),
    ],
)
async def test_a_configuration_missing_a_piece_fails_before_the_idp_is_asked(
    overrides: dict[str, Any], message: str
) -> None:
    idp = Idp(AuthWorld())
    with pytest.raises(AuthFailed, match=message):
        await provider(idp, enterprise(**overrides)).challenged(401, CHALLENGE, None)
    assert idp.requests == []


def test_the_workflow_block_resolves_its_references_and_masks_them() -> None:
    auth = ServerAuth(
        grant="enterprise",
        client_id="ci-bot",
        client_secret="$CS",
        id_token="$IDT",
        idp_issuer=IDP,
        idp_client_id="agent-at-idp",
        idp_client_secret="$IDPS",
    )
    env = {"CS": SECRET, "IDT": ID_TOKEN_VALUE, "IDPS": "idp-secret-456"}
    config = auth_config(auth, env)
    assert (config.grant, config.id_token, config.idp_issuer, config.idp_token_url) == (
        "enterprise",
        ID_TOKEN_VALUE,
        IDP,
        None,
    )
    assert (config.idp_client_id, config.idp_client_secret) == ("agent-at-idp", "idp-secret-456")
    assert auth_secrets(auth, env) == {
        "client_secret": SECRET,
        "id_token": ID_TOKEN_VALUE,
        "idp_client_secret": "idp-secret-456",
    }
    assert set(config.secrets()) == {SECRET, ID_TOKEN_VALUE, "idp-secret-456"}
    assert ID_TOKEN_VALUE not in repr(config) and "idp-secret-456" not in repr(config)


async def test_two_users_of_one_client_do_not_share_a_cached_token() -> None:
    idp = Idp(AuthWorld())
    cache = TokenCache()
    alice = provider(idp, enterprise(), cache=cache)
    bob = provider(idp, enterprise(id_token="eyJ.id-token-of-bob.sig"), cache=cache)
    alice_again = provider(idp, enterprise(), cache=cache)
    for auth in (alice, bob, alice_again):
        await auth.challenged(401, CHALLENGE, None)
    assert [r["subject_token"] for r in idp.requests] == [ID_TOKEN_VALUE, "eyJ.id-token-of-bob.sig"]
    assert alice.header() == alice_again.header() != bob.header()
