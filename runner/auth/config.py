"""What a server's ``auth:`` says, with its secrets resolved: :class:`AuthConfig`.

Grants (``grant``):

``client_credentials``  the client's own credentials (a secret, or a private key for ``private_key_jwt``)
``jwt_bearer``          RFC 7523: a workload identity token (an environment variable, a file, or GitHub
                        Actions' OIDC endpoint) exchanged for an access token
``enterprise``          SEP-990: the ID token of an enterprise sign-in exchanged at the IdP for an ID-JAG
                        (RFC 8693), which a jwt-bearer grant turns into an access token (:mod:`.enterprise`)
``login``               the refresh token a person stored with ``mcp-run login URL``
``authorization_code``  the interactive flow (``mcp-run login``; the conformance client drives it headless)

Secrets are given as references, resolved here: ``$NAME`` (an environment variable) or ``file:PATH``
(a file's content, stripped). A literal secret in a workflow is refused by :func:`resolve_secret`'s
callers in the workflow layer; here a plain string is taken as is (the command line's ``--client-secret``
reads an environment variable name too). ``repr`` never shows a secret.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Final, Literal

from runner.auth.errors import AuthFailed

__all__ = ["AUTH_METHODS", "GRANTS", "AuthConfig", "resolve_secret"]

Grant = Literal["client_credentials", "jwt_bearer", "enterprise", "login", "authorization_code"]
GRANTS: Final = ("client_credentials", "jwt_bearer", "enterprise", "login", "authorization_code")
AuthMethod = Literal["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]
AUTH_METHODS: Final = ("client_secret_basic", "client_secret_post", "private_key_jwt", "none")

_SECRET_FIELDS: Final = frozenset({"client_secret", "private_key", "assertion", "id_token", "idp_client_secret"})


def resolve_secret(reference: str, environ: Mapping[str, str] | None = None) -> str:
    """The secret ``reference`` points to: ``$NAME`` or ``${NAME}`` (environment), ``file:PATH`` (a file,
    stripped of surrounding whitespace). Raises ``AuthFailed`` naming the reference, never the value."""
    env = os.environ if environ is None else environ
    if reference.startswith("$"):
        name = reference[2:-1] if reference.startswith("${") and reference.endswith("}") else reference[1:]
        value = env.get(name)
        if not value:
            raise AuthFailed(f"the environment variable {name} is not set (it should hold a credential)")
        return value
    if reference.startswith("file:"):
        path = Path(reference[5:]).expanduser()
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise AuthFailed(f"cannot read the credential file {path}: {exc.strerror}") from None
    return reference


@dataclass(frozen=True, slots=True, repr=False)
class AuthConfig:
    """How to obtain tokens for one server (secrets resolved; see the module docstring).

    ``issuer``         the authorization server to use (else the resource metadata's first)
    ``client_id``      the registered client (for ``authorization_code``: else dynamic registration, or the
                       ``client_metadata_url`` as a client-ID metadata document)
    ``auth_method``    how the client authenticates at the token endpoint; by default ``private_key_jwt``
                       when a key is given, ``client_secret_basic`` with a secret, else ``none``
    ``assertion``      the jwt-bearer grant's workload token; or ``github_audience``: fetch one from GitHub
                       Actions' OIDC endpoint with that audience
    ``id_token``       the enterprise grant's ID token (from the IdP sign-in), exchanged at the IdP's token
                       endpoint (``idp_token_url``, or found from ``idp_issuer``) as the IdP client
                       ``idp_client_id`` (with ``idp_client_secret`` when the IdP wants one)
    ``signing_alg``    ``ES256`` or ``RS256`` for ``private_key_jwt`` (by default from the key's type)
    ``step_up_limit``  403 ``insufficient_scope`` answers followed with a wider token, per token
    ``dpop``           DPoP-bound tokens (RFC 9449): True always, False never, None (the default) when the
                       authorization server offers them (:func:`runner.auth.dpop.wanted`)
    """

    grant: Grant = "client_credentials"
    client_id: str | None = None
    client_secret: str | None = None
    private_key: str | None = None
    signing_alg: str | None = None
    key_id: str | None = None
    auth_method: AuthMethod | None = None
    scopes: Sequence[str] = ()
    issuer: str | None = None
    assertion: str | None = None
    github_audience: str | None = None
    client_metadata_url: str | None = None
    id_token: str | None = None
    idp_token_url: str | None = None
    idp_issuer: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = None
    step_up_limit: int = 2
    dpop: bool | None = None
    secret_values: Sequence[str] = field(default=(), compare=False)

    def method(self) -> AuthMethod:
        if self.auth_method is not None:
            return self.auth_method
        if self.private_key:
            return "private_key_jwt"
        if self.client_secret:
            return "client_secret_basic"
        return "none"

    def subject_key(self) -> str:
        """What tells apart, in the process's token cache, the tokens one client obtains for different subjects:
        the grant (a client's own token is not the token of a person's login with the same client id), and a
        digest of what names the subject (the enterprise grant's ID token; the jwt-bearer grant's assertion,
        or the audience of the GitHub Actions token it is fetched as), never the value itself (cache keys are
        not secrets)."""
        key = f"#{self.grant}"
        if self.grant == "enterprise":
            key += _digest("id-token", self.id_token or "")
        elif self.grant == "jwt_bearer" and self.assertion:
            key += _digest("assertion", self.assertion)
        elif self.grant == "jwt_bearer":
            key += _digest("github-audience", self.github_audience or "")
        return key

    def secrets(self) -> list[str]:
        """Every secret this configuration holds (to register with the masker)."""
        found = [getattr(self, name) for name in _SECRET_FIELDS]
        return [value for value in (*found, *self.secret_values) if isinstance(value, str) and value]

    def __repr__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _SECRET_FIELDS or f.name == "secret_values":
                value = "***" if value else value
            parts.append(f"{f.name}={value!r}")
        return f"AuthConfig({', '.join(parts)})"


def _digest(label: str, value: str) -> str:
    return f"#{label}:{hashlib.sha256(value.encode()).hexdigest()[:16]}"
