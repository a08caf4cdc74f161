"""Enterprise-managed authorization (SEP-990, the ``enterprise`` grant): an ID token becomes an ID-JAG.

A person signed in to the enterprise's identity provider (IdP) once; the client holds the ID token that
sign-in gave. For each MCP server the client then:

1. asks the IdP's token endpoint for an Identity Assertion JWT Authorization Grant (ID-JAG) by token
   exchange (RFC 8693): ``subject_token`` = the ID token (``subject_token_type`` ``id_token``),
   ``requested_token_type`` ``id-jag``, ``audience`` = the issuer of the MCP server's authorization server,
   ``resource`` = the MCP server (RFC 9728's resource identifier), and ``scope`` when one is known; the
   client authenticates at the IdP as the IdP knows it (``idp_client_id``, with ``idp_client_secret`` in
   the body when given);
2. presents the ID-JAG to the MCP server's authorization server as a jwt-bearer grant (RFC 7523), with its
   own client authentication there (:meth:`OAuthProvider.token_request`).

This module is step 1 (:func:`request_id_jag`); the provider does step 2 with the assertion it returns.
The IdP's token endpoint is configured (``idp_token_url``) or found from the IdP's issuer
(``idp_issuer``: its OpenID Connect or RFC 8414 metadata). The ID token, the IdP client secret and the
ID-JAG are secrets: each is handed to ``on_secret`` (the run's masker) before it is sent or returned.
An ID-JAG is short-lived and bound to one audience and resource: a new one is asked for every grant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from runner.auth import discovery
from runner.auth.config import AuthConfig
from runner.auth.errors import AuthFailed
from runner.auth.http import AuthHttp
from runner.auth.tokens import token_error

__all__ = ["ID_JAG", "ID_TOKEN", "TOKEN_EXCHANGE", "idp_token_endpoint", "request_id_jag"]

TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN: Final = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG: Final = "urn:ietf:params:oauth:token-type:id-jag"


async def idp_token_endpoint(http: AuthHttp, config: AuthConfig) -> str:
    """The IdP's token endpoint: ``idp_token_url``, else the ``token_endpoint`` of ``idp_issuer``'s metadata
    (OpenID Connect discovery first: an IdP is an OpenID provider), its ``issuer`` checked."""
    if config.idp_token_url:
        return discovery.check_endpoint(config.idp_token_url, "IdP token endpoint")
    issuer = config.idp_issuer
    if not issuer:
        raise AuthFailed("the enterprise grant needs the IdP's token endpoint (auth: idp_token_url or idp_issuer)")
    discovery.check_endpoint(issuer, "IdP issuer")
    rfc8414, *openid = discovery.server_metadata_urls(issuer)
    for url in (*openid, rfc8414):
        data = await http.get_json(url)
        if isinstance(data, Mapping):
            if data.get("issuer") != issuer:
                raise AuthFailed(f"the IdP's metadata names the issuer {data.get('issuer')!r}, expected {issuer!r}")
            return discovery.check_endpoint(data.get("token_endpoint"), "IdP token endpoint")
    raise AuthFailed(f"no metadata found for the IdP {issuer} (give auth: idp_token_url)")


async def request_id_jag(
    http: AuthHttp,
    config: AuthConfig,
    *,
    audience: str,
    resource: str,
    scope: str | None,
    on_secret: Callable[[str], None],
) -> str:
    """An ID-JAG for ``audience`` (the authorization server's issuer) and ``resource`` (the MCP server), by
    token exchange at the IdP; ``AuthFailed`` saying what the IdP answered (never what was sent)."""
    if not config.id_token:
        raise AuthFailed("the enterprise grant needs the ID token from the IdP sign-in (auth: id_token)")
    endpoint = await idp_token_endpoint(http, config)
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "audience": audience,
        "resource": resource,
        "subject_token": config.id_token,
        "subject_token_type": ID_TOKEN,
    }
    if scope:
        form["scope"] = scope
    on_secret(config.id_token)
    if config.idp_client_id:
        form["client_id"] = config.idp_client_id
        if config.idp_client_secret:
            on_secret(config.idp_client_secret)
            form["client_secret"] = config.idp_client_secret
    status, data = await http.post(endpoint, form=form, headers={"Accept": "application/json"})
    if status != 200:
        raise AuthFailed(f"the IdP refused the token exchange for an ID-JAG ({status}, {token_error(data)})")
    return _id_jag(data, on_secret)


def _id_jag(data: Any, on_secret: Callable[[str], None]) -> str:
    """The ID-JAG in a token exchange response (RFC 8693 section 2.2.1: in ``access_token``, with
    ``issued_token_type`` naming it)."""
    if not isinstance(data, Mapping):
        raise AuthFailed("the IdP's token exchange answer is not a JSON object")
    assertion = data.get("access_token")
    if not isinstance(assertion, str) or not assertion:
        raise AuthFailed("the IdP's token exchange answer has no access_token (the ID-JAG)")
    on_secret(assertion)
    issued = data.get("issued_token_type")
    if issued != ID_JAG:
        raise AuthFailed(f"the IdP issued a {str(issued)[:80]!r} token, not an ID-JAG ({ID_JAG})")
    return assertion
