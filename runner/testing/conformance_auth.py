"""The conformance client's OAuth: a provider for an ``auth/...`` scenario, from the suite's context.

The suite passes credentials in ``MCP_CONFORMANCE_CONTEXT`` (JSON): ``client_id`` with ``client_secret``
(the client-credentials scenarios, and ``auth/pre-registration``), ``private_key_pem`` with
``signing_algorithm`` (``auth/client-credentials-jwt``), or a workload's ``valid_jwt``
(``auth/wif-jwt-bearer``: a jwt-bearer grant), or an enterprise IdP's ``idp_id_token`` with its
``idp_token_endpoint`` and ``idp_client_id`` (``auth/enterprise-managed-authorization``, SEP-990: the
enterprise grant, ``client_id`` and ``client_secret`` then being the client's at the MCP server's
authorization server). Without a context the scenario is an interactive one: the
authorization-code flow, driven headless (the suite's authorization server redirects back at once), with
the suite's client-ID metadata document URL when the server supports those, else dynamic registration.
``auth/dpop`` and ``auth/dpop-nonce`` are such flows: their authorization server lists ES256 in
``dpop_signing_alg_values_supported``, so the provider's default (``dpop`` unset) uses DPoP.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Final

from runner.auth.authcode import HeadlessRedirector, authorizer
from runner.auth.config import AuthConfig
from runner.auth.http import AuthHttp
from runner.auth.provider import OAuthProvider
from runner.auth.tokens import TokenCache

__all__ = ["CONFORMANCE_CLIENT_METADATA_URL", "CONTEXT_ENV", "scenario_provider"]

CONTEXT_ENV: Final = "MCP_CONFORMANCE_CONTEXT"
CONFORMANCE_CLIENT_METADATA_URL: Final = "https://conformance-test.local/client-metadata.json"


def _context(environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        data = json.loads(environ.get(CONTEXT_ENV) or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _text(context: Mapping[str, Any], key: str) -> str | None:
    value = context.get(key)
    return value if isinstance(value, str) and value else None


def scenario_provider(scenario: str, url: str, environ: Mapping[str, str] | None = None) -> OAuthProvider:
    context = _context(os.environ if environ is None else environ)
    http = AuthHttp()
    common: dict[str, Any] = {
        "client_id": _text(context, "client_id"),
        "client_secret": _text(context, "client_secret"),
    }
    if scenario == "auth/wif-jwt-bearer":  # workload identity: the workload's JWT for a jwt-bearer grant
        config = AuthConfig(grant="jwt_bearer", client_id=common["client_id"], assertion=_text(context, "valid_jwt"))
        return OAuthProvider(url, config, http=http, cache=TokenCache())
    if scenario == "auth/enterprise-managed-authorization":  # SEP-990: ID token -> ID-JAG -> access token
        config = AuthConfig(
            grant="enterprise",
            id_token=_text(context, "idp_id_token"),
            idp_token_url=_text(context, "idp_token_endpoint"),
            idp_client_id=_text(context, "idp_client_id"),
            **common,
        )
        return OAuthProvider(url, config, http=http, cache=TokenCache())
    if scenario.startswith("auth/client-credentials"):
        config = AuthConfig(
            grant="client_credentials",
            private_key=_text(context, "private_key_pem"),
            signing_alg=_text(context, "signing_algorithm"),
            **common,
        )
        return OAuthProvider(url, config, http=http, cache=TokenCache())
    config = AuthConfig(grant="authorization_code", client_metadata_url=CONFORMANCE_CLIENT_METADATA_URL, **common)
    return OAuthProvider(url, config, http=http, cache=TokenCache(), authorizer=authorizer(HeadlessRedirector(http)))
