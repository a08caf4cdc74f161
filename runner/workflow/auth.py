"""A server's ``auth:`` block (OAuth for a Streamable HTTP server), and what makes one invalid.

::

    servers:
      api:
        url: https://api.example.com/mcp
        auth:
          grant: client_credentials          # client_credentials | jwt_bearer | enterprise | login
          client_id: ci-bot
          client_secret: $MCP_CLIENT_SECRET  # a reference: $NAME (environment) or file:PATH, never the value
          scopes: [mcp:read]
          dpop: false                        # DPoP-bound tokens: by default when the server offers them
      wiki:
        url: https://wiki.example.com/mcp
        auth:                                # SEP-990: the enterprise IdP vouches for the user
          grant: enterprise
          client_id: wiki-agent              # as registered with the MCP server's authorization server
          client_secret: $WIKI_CLIENT_SECRET
          id_token: $IDP_ID_TOKEN            # the ID token of the user's sign-in at the IdP
          idp_token_url: https://idp.example.com/oauth2/token
          idp_client_id: agent-at-idp

Secrets (``client_secret``, ``private_key``, ``assertion``, ``id_token``, ``idp_client_secret``) are
references only: a literal value would sit
in the workflow file, in the repository. :func:`auth_problems` lists what is wrong, located under ``auth``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

if TYPE_CHECKING:
    from runner.workflow.literals import Problem

__all__ = ["SECRET_REFERENCE", "ServerAuth", "auth_problems"]

SECRET_REFERENCE: Final = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}|file:.+")
_REFERENCE_HINT: Final = "write $NAME (an environment variable) or file:PATH (a file holding it)"
_SECRET_FIELDS: Final = ("client_secret", "private_key", "assertion", "id_token", "idp_client_secret")
_ENTERPRISE_FIELDS: Final = ("id_token", "idp_token_url", "idp_issuer", "idp_client_id", "idp_client_secret")
_ISSUER: Final = re.compile(r"https://[^/]|http://(localhost|127\.0\.0\.1|\[::1\])[:/]")


_AUTH_METHODS: Final = ("client_secret_basic", "client_secret_post", "private_key_jwt", "none")
# typing caches Literal types by their set of values, so another library's Literal of the same four names (the
# mcp package has one) can come back in its order: the schema states the order itself.
AuthMethodName = Annotated[
    Literal["client_secret_basic", "client_secret_post", "private_key_jwt", "none"],
    WithJsonSchema({"type": "string", "enum": list(_AUTH_METHODS)}),
]


class ServerAuth(BaseModel):
    """OAuth for a Streamable HTTP server."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    grant: Literal["client_credentials", "jwt_bearer", "enterprise", "login"] = Field(
        default="client_credentials",
        description="client_credentials (a client secret or private key), jwt_bearer (a workload identity token, "
        "RFC 7523), enterprise (SEP-990: an enterprise IdP's ID token exchanged for an ID-JAG, then a jwt-bearer "
        "grant), or login (the refresh token stored by `mcp-run login URL`).",
    )
    client_id: str | None = Field(default=None, description="The registered client's id.")
    client_secret: str | None = Field(default=None, description="A reference to the secret: $NAME or file:PATH.")
    private_key: str | None = Field(
        default=None,
        description="A reference to a PEM private key (private_key_jwt, ES256 or RS256): $NAME or file:PATH.",
    )
    auth_method: AuthMethodName | None = Field(
        default=None, description="Client authentication at the token endpoint (default: by the credential given)."
    )
    scopes: list[str] | None = Field(default=None, description="Scopes to ask for (default: what the server asks).")
    issuer: str | None = Field(
        default=None, description="The authorization server to use (default: the server's first)."
    )
    assertion: str | None = Field(
        default=None, description="jwt_bearer: a reference to the workload token: $NAME or file:PATH."
    )
    github_audience: str | None = Field(
        default=None,
        description="jwt_bearer: fetch the workload token from GitHub Actions' OIDC endpoint for this audience.",
    )
    id_token: str | None = Field(
        default=None, description="enterprise: a reference to the ID token of the IdP sign-in: $NAME or file:PATH."
    )
    idp_token_url: str | None = Field(
        default=None, description="enterprise: the IdP's token endpoint, where the ID token is exchanged."
    )
    idp_issuer: str | None = Field(
        default=None, description="enterprise: the IdP's issuer, whose metadata names its token endpoint."
    )
    idp_client_id: str | None = Field(default=None, description="enterprise: the client's id at the IdP.")
    idp_client_secret: str | None = Field(
        default=None, description="enterprise: a reference to the client's secret at the IdP: $NAME or file:PATH."
    )
    dpop: bool | None = Field(
        default=None,
        description="DPoP-bound tokens (RFC 9449): true always, false never; by default when the authorization "
        "server lists ES256 in dpop_signing_alg_values_supported (or the server challenges with DPoP only).",
    )


def auth_problems(auth: ServerAuth) -> list[Problem]:
    """Everything wrong with ``auth``, each located below ``auth``."""
    from runner.workflow.literals import Problem  # literals imports the model, which imports this module

    found = [
        Problem(("auth", key), f"{key} must be a reference, not the secret itself", _REFERENCE_HINT)
        for key in _SECRET_FIELDS
        if getattr(auth, key) is not None and not SECRET_REFERENCE.fullmatch(getattr(auth, key))
    ]
    found.extend(Problem(("auth", *loc), message, at="key") for loc, message in _grant_problems(auth))
    for key in ("issuer", "idp_token_url", "idp_issuer"):
        value = getattr(auth, key)
        if value is not None and not _ISSUER.match(value):
            found.append(Problem(("auth", key), f"the {key} must be an https:// URL (http:// only on loopback)"))
    return found


def _grant_problems(auth: ServerAuth) -> list[tuple[tuple[str, ...], str]]:
    """What the grant needs and is missing, or is given and does not use: (path below ``auth``, message)."""
    found = _client_credentials_problems(auth) if auth.grant == "client_credentials" else []
    if auth.client_secret is not None and auth.private_key is not None:
        found.append((("private_key",), "give client_secret or private_key, not both"))
    if auth.grant == "jwt_bearer" and auth.assertion is None and auth.github_audience is None:
        found.append(((), "the jwt_bearer grant needs assertion or github_audience"))
    if auth.grant != "jwt_bearer":
        found.extend(
            ((key,), f"{key} applies only to the jwt_bearer grant")
            for key in ("assertion", "github_audience")
            if getattr(auth, key) is not None
        )
    if auth.grant == "enterprise":
        found.extend(_enterprise_problems(auth))
    else:
        found.extend(
            ((key,), f"{key} applies only to the enterprise grant")
            for key in _ENTERPRISE_FIELDS
            if getattr(auth, key) is not None
        )
    return found


def _enterprise_problems(auth: ServerAuth) -> list[tuple[tuple[str, ...], str]]:
    found: list[tuple[tuple[str, ...], str]] = []
    if auth.client_id is None:
        found.append(((), "the enterprise grant needs client_id (the client registered with the authorization server)"))
    if auth.id_token is None:
        found.append(((), "the enterprise grant needs id_token (the ID token of the IdP sign-in)"))
    if auth.idp_token_url is None and auth.idp_issuer is None:
        found.append(((), "the enterprise grant needs idp_token_url or idp_issuer"))
    elif auth.idp_token_url is not None and auth.idp_issuer is not None:
        found.append((("idp_issuer",), "give idp_token_url or idp_issuer, not both"))
    if auth.idp_client_secret is not None and auth.idp_client_id is None:
        found.append((("idp_client_secret",), "idp_client_secret needs idp_client_id"))
    return found


def _client_credentials_problems(auth: ServerAuth) -> list[tuple[tuple[str, ...], str]]:
    found: list[tuple[tuple[str, ...], str]] = []
    if auth.client_id is None:
        found.append(((), "the client_credentials grant needs client_id"))
    if auth.client_secret is None and auth.private_key is None:
        found.append(((), "the client_credentials grant needs client_secret or private_key"))
    return found
