"""Client authentication at the token endpoint, and the signed assertions it needs.

``client_secret_basic`` (HTTP Basic, each part form-encoded, RFC 6749 section 2.3.1),
``client_secret_post`` (in the body), ``private_key_jwt`` (RFC 7523 section 2.2: a JWT signed with the
client's key, ``iss`` = ``sub`` = the client id, ``aud`` = the issuer), and ``none`` (a public client: its
id in the body). Signing uses PyJWT with ``cryptography`` (the ``auth`` extra): ES256 for an EC key, RS256
for an RSA key, unless configured.
"""

from __future__ import annotations

import base64
import secrets
import time
from typing import Final
from urllib.parse import quote

from runner.auth.config import AuthConfig, AuthMethod
from runner.auth.errors import AuthFailed

__all__ = ["ASSERTION_LIFETIME", "apply_client_auth", "sign_client_assertion"]

ASSERTION_LIFETIME: Final = 300
CLIENT_ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def sign_client_assertion(config: AuthConfig, client_id: str, audience: str, *, now: float | None = None) -> str:
    """A ``private_key_jwt`` client assertion for ``audience`` (the issuer)."""
    if not config.private_key:
        raise AuthFailed("private_key_jwt needs a private key (auth: private_key)")
    try:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:
        raise AuthFailed("private_key_jwt needs PyJWT and cryptography: pip install 'mcp-batch-run[auth]'") from None
    try:
        key = load_pem_private_key(config.private_key.encode(), password=None)
    except (ValueError, TypeError):
        raise AuthFailed("the private key is not an unencrypted PEM private key") from None
    alg = config.signing_alg
    if alg is None:
        if isinstance(key, ec.EllipticCurvePrivateKey):
            alg = "ES256"
        elif isinstance(key, rsa.RSAPrivateKey):
            alg = "RS256"
        else:
            raise AuthFailed("the private key must be an EC (ES256) or RSA (RS256) key")
    issued = int(time.time() if now is None else now)
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": issued,
        "exp": issued + ASSERTION_LIFETIME,
        "jti": secrets.token_urlsafe(16),
    }
    headers = {"kid": config.key_id} if config.key_id else None
    try:
        return jwt.encode(claims, key, algorithm=alg, headers=headers)  # type: ignore[arg-type]
    except (ValueError, TypeError, NotImplementedError, jwt.PyJWTError) as exc:
        raise AuthFailed(f"cannot sign the client assertion with {alg}: {type(exc).__name__}") from None


def apply_client_auth(
    method: AuthMethod,
    config: AuthConfig,
    client_id: str,
    issuer: str,
    form: dict[str, str],
    headers: dict[str, str],
    *,
    client_secret: str | None = None,
) -> list[str]:
    """Add the client's authentication to a token request's ``form`` and ``headers``; returns the secrets
    it put there (the assertion), to be masked. ``client_secret`` overrides the configured one (a secret
    issued by dynamic registration)."""
    secret = client_secret if client_secret is not None else config.client_secret
    if method == "client_secret_basic":
        if not secret:
            raise AuthFailed("client_secret_basic needs a client secret")
        pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        return []
    if method == "client_secret_post":
        if not secret:
            raise AuthFailed("client_secret_post needs a client secret")
        form["client_id"] = client_id
        form["client_secret"] = secret
        return []
    if method == "private_key_jwt":
        assertion = sign_client_assertion(config, client_id, issuer)
        form["client_id"] = client_id
        form["client_assertion_type"] = CLIENT_ASSERTION_TYPE
        form["client_assertion"] = assertion
        return [assertion]
    form["client_id"] = client_id
    return []
