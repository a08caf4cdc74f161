"""The authorization-code flow with PKCE (S256), for ``mcp-run login`` and the conformance client.

The client is, in order: the configured one (pre-registered: ``client_id``, perhaps a secret), a
client-ID metadata document (``client_metadata_url``, when the server says
``client_id_metadata_document_supported``), or one registered dynamically (RFC 7591) at the server's
``registration_endpoint``. The browser part is a :class:`Redirector`: it knows the redirect URI and, given
the authorization URL, returns the parameters the authorization server redirected back with
(:mod:`.loopback` waits for a browser on a loopback port; :class:`HeadlessRedirector` follows the
redirect itself, for an authorization server that answers at once, as the conformance suite's does).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Mapping
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

from runner.auth import discovery
from runner.auth.errors import AuthFailed
from runner.auth.http import AuthHttp
from runner.auth.provider import Authorizer, OAuthProvider
from runner.auth.tokens import Token, token_error

__all__ = ["CLIENT_NAME", "HeadlessRedirector", "Redirector", "authorizer", "pkce_pair"]

CLIENT_NAME: Final = "mcp-run"


class Redirector(Protocol):
    @property
    def redirect_uri(self) -> str: ...

    async def authorize(self, url: str) -> Mapping[str, str]:
        """Have ``url`` visited; return the query of the redirect back to ``redirect_uri``."""
        ...


class HeadlessRedirector:
    """Visits the authorization URL itself and reads the redirect's ``Location`` (no person involved)."""

    def __init__(self, http: AuthHttp, redirect_uri: str = "http://localhost:3000/callback") -> None:
        self._http = http
        self._redirect_uri = redirect_uri

    @property
    def redirect_uri(self) -> str:
        return self._redirect_uri

    async def authorize(self, url: str) -> Mapping[str, str]:
        location = await self._http.get_location(url)
        if location is None:
            raise AuthFailed("the authorization endpoint did not redirect back (it needs a person: use mcp-run login)")
        return dict(parse_qsl(urlsplit(location).query))


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier (RFC 7636: 43-128 characters) and its S256 challenge."""
    verifier = secrets.token_urlsafe(64)[:96]
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


async def _register(provider: OAuthProvider, metadata: Mapping[str, Any], redirect_uri: str) -> None:
    """Dynamic client registration (RFC 7591); sets the provider's client id (and secret)."""
    endpoint = discovery.check_endpoint(metadata.get("registration_endpoint"), "registration endpoint")
    method = _registration_method(metadata.get("token_endpoint_auth_methods_supported"))
    request = {
        "client_name": CLIENT_NAME,
        # SEP-837: a client whose redirect is a loopback address is a native application
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    }
    status, data = await provider.http.post(endpoint, body=request, headers={"Accept": "application/json"})
    if status not in (200, 201) or not isinstance(data, Mapping) or not isinstance(data.get("client_id"), str):
        raise AuthFailed(f"dynamic client registration failed ({status}, {token_error(data)})")
    _take_registration(provider, data)


def _registration_method(offered: Any) -> str:
    """The client authentication to register with: none when the server takes it (or says nothing), else a
    client secret (basic unless only post is offered)."""
    if not isinstance(offered, list) or not offered or "none" in offered:
        return "none"
    return next((m for m in ("client_secret_basic", "client_secret_post") if m in offered), "client_secret_basic")


def _take_registration(provider: OAuthProvider, data: Mapping[str, Any]) -> None:
    """Keep what the registration issued: the client id, a secret (masked from then on), the method agreed."""
    provider.client_id = data["client_id"]
    provider.registered_with = provider.issuer
    secret = data.get("client_secret")
    provider.client_secret = secret if isinstance(secret, str) and secret else None
    if provider.client_secret:
        provider.secret(provider.client_secret)
    registered = data.get("token_endpoint_auth_method")
    if registered in ("client_secret_basic", "client_secret_post", "none"):
        provider.registered_method = registered
    elif provider.client_secret is None:
        provider.registered_method = "none"


async def _identify(provider: OAuthProvider, metadata: Mapping[str, Any], redirect_uri: str) -> None:
    """Give a provider without a client id one: its client metadata document's URL where the server takes
    one (CIMD), else by dynamic registration."""
    cimd = provider.config.client_metadata_url
    if cimd and metadata.get("client_id_metadata_document_supported") is True:
        provider.client_id = cimd
        provider.registered_method = "none"
        provider.registered_with = provider.issuer
    elif metadata.get("registration_endpoint"):
        await _register(provider, metadata, redirect_uri)
    else:
        raise AuthFailed("the authorization server offers no registration: register a client and configure its id")


def check_response_issuer(answer: Mapping[str, str], metadata: Mapping[str, Any]) -> None:
    """RFC 9207, as MCP 2026-07-28 asks: an ``iss`` in the authorization response must equal the issuer the
    metadata named, compared as plain strings (no URL normalization), whether or not the server advertised it;
    a server that advertises ``authorization_response_iss_parameter_supported`` must send it."""
    issuer = metadata.get("issuer")
    iss = answer.get("iss")
    if iss is not None:
        if iss != issuer:
            raise AuthFailed(
                f"the authorization response names issuer {iss!r}, not {issuer!r} (RFC 9207): refused, a response "
                "from another authorization server (a mix-up attack, or a misconfigured server)"
            )
    elif metadata.get("authorization_response_iss_parameter_supported") is True:
        raise AuthFailed(
            "the authorization server says it sends iss in its responses (RFC 9207), but this one has none: refused"
        )


def authorizer(redirector: Redirector) -> Authorizer:
    """The provider's interactive grant over ``redirector``."""

    async def run(provider: OAuthProvider, metadata: Mapping[str, Any], scope: str | None) -> Token:
        endpoint = discovery.check_endpoint(metadata.get("authorization_endpoint"), "authorization endpoint")
        redirect_uri = redirector.redirect_uri
        if provider.client_id is None:
            await _identify(provider, metadata, redirect_uri)
        assert provider.client_id is not None
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(24)
        query = {
            "response_type": "code",
            "client_id": provider.client_id,
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "resource": provider.resource,
        }
        if scope:
            query["scope"] = scope
        separator = "&" if urlsplit(endpoint).query else "?"
        answer = await redirector.authorize(f"{endpoint}{separator}{urlencode(query)}")
        if answer.get("state") != state:
            raise AuthFailed("the authorization response's state does not match the request (possible forgery)")
        check_response_issuer(answer, metadata)
        if "error" in answer:
            raise AuthFailed(f"authorization refused: {token_error(dict(answer))}")
        code = answer.get("code")
        if not code:
            raise AuthFailed("the authorization response carries no code")
        provider.secret(code)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri}
        form["code_verifier"] = verifier
        return await provider.token_request(form)

    return run
