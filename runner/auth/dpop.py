"""DPoP (RFC 9449, MCP SEP-1932): proofs of possession of a per-run key, and the servers' nonces.

A DPoP-bound access token is useless without the private key it is bound to: each request carries a fresh
proof, a JWT signed with that key (``typ`` ``dpop+jwt``, the public key in its ``jwk`` header) that names
the request (``htm``, the method; ``htu``, the URL without query or fragment), when it was made (``iat``),
a unique id (``jti``), on a resource request the hash of the token it accompanies (``ath``), and the
latest nonce the server gave (``nonce``), when it gave one.

- :class:`ProofKey`: an ES256 (P-256) key made once per process (:func:`run_key`), never written anywhere;
  its ``repr`` shows only its thumbprint (RFC 7638), which is public.
- :class:`Nonces`: the latest ``DPoP-Nonce`` of each server, the authorization server's and the
  resource's apart (RFC 9449 sections 8 and 9), by origin.
- :func:`wanted`: whether to use DPoP with an authorization server.

Signing uses PyJWT with ``cryptography`` (the ``auth`` extra), imported when the first key is made.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from runner.auth.errors import AuthFailed

__all__ = ["ALG", "Nonces", "ProofKey", "access_token_hash", "htu", "proof_nonce", "run_key", "wanted"]

ALG: Final = "ES256"
"""The one signing algorithm we offer; an authorization server that lists others but not it gets none."""

Role = Literal["authorization", "resource"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def htu(url: str) -> str:
    """The ``htu`` claim for a request to ``url``: the URL without its query and fragment (section 4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def access_token_hash(access_token: str) -> str:
    """The ``ath`` claim: base64url of the SHA-256 of the token's ASCII (section 4.2)."""
    return _b64(hashlib.sha256(access_token.encode("ascii")).digest())


class ProofKey:
    """An ES256 key pair that signs DPoP proofs. Made in memory; the private half never leaves it."""

    def __init__(self) -> None:
        try:
            import jwt
            from cryptography.hazmat.primitives.asymmetric import ec
        except ImportError:
            raise AuthFailed(
                "this server's authorization uses DPoP, which needs PyJWT and cryptography: "
                "pip install 'mcp-batch-run[auth]' (or set `dpop: false` in its auth block)"
            ) from None
        self._jwt = jwt
        self._key = ec.generate_private_key(ec.SECP256R1())
        numbers = self._key.public_key().public_numbers()
        self.jwk: Final[dict[str, str]] = {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64(numbers.x.to_bytes(32, "big")),
            "y": _b64(numbers.y.to_bytes(32, "big")),
        }

    @property
    def thumbprint(self) -> str:
        """The JWK SHA-256 thumbprint (RFC 7638): the ``jkt`` a bound token's ``cnf`` names."""
        canonical = json.dumps(
            {k: self.jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True
        )
        return _b64(hashlib.sha256(canonical.encode("ascii")).digest())

    def proof(
        self,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
        now: float | None = None,
    ) -> str:
        """A fresh proof for ``method`` ``url`` (with ``ath`` when it accompanies ``access_token``)."""
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(time.time() if now is None else now),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        headers = {"typ": "dpop+jwt", "jwk": self.jwk}
        return self._jwt.encode(claims, self._key, algorithm=ALG, headers=headers)

    def __repr__(self) -> str:
        return f"ProofKey({ALG}, jkt={self.thumbprint!r})"


_RUN_KEY: ProofKey | None = None


def run_key() -> ProofKey:
    """The process's key, made on first use: every server and token of a run shares it, so a bound token
    taken from the process's token cache always has its key."""
    global _RUN_KEY
    if _RUN_KEY is None:
        _RUN_KEY = ProofKey()
    return _RUN_KEY


def proof_nonce(proof: str | None) -> str | None:
    """The ``nonce`` claim of a proof we made (read back unverified; None when it has none)."""
    if not proof:
        return None
    try:
        payload = proof.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    nonce = claims.get("nonce") if isinstance(claims, dict) else None
    return nonce if isinstance(nonce, str) else None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


class Nonces:
    """The latest nonce each server gave (``DPoP-Nonce``), by role and origin."""

    def __init__(self) -> None:
        self._nonces: dict[tuple[Role, str], str] = {}

    def get(self, role: Role, url: str) -> str | None:
        return self._nonces.get((role, _origin(url)))

    def take(self, role: Role, url: str, nonce: str | None) -> bool:
        """Remember ``nonce`` (a response's ``DPoP-Nonce``, None: it sent none); True when it is new."""
        if not nonce or not nonce.isascii() or not nonce.isprintable():
            return False
        key = (role, _origin(url))
        if self._nonces.get(key) == nonce:
            return False
        self._nonces[key] = nonce
        return True


def wanted(setting: bool | None, metadata: Mapping[str, Any], *, challenged_dpop: bool = False) -> bool:
    """Whether to ask the authorization server for DPoP-bound tokens.

    ``setting`` (the server's ``auth: dpop``): True always, False never. None (the default): when the
    authorization server's metadata lists ``dpop_signing_alg_values_supported`` with ES256, or when it
    lists none and the resource challenged with the ``DPoP`` scheme only. A list without ES256 offers
    nothing we can sign: Bearer (or, with ``dpop: true``, an error).
    """
    algs = metadata.get("dpop_signing_alg_values_supported")
    offered = isinstance(algs, list) and ALG in algs
    if setting is True:
        if isinstance(algs, list) and algs and not offered:
            raise AuthFailed(f"the authorization server's DPoP algorithms {algs[:8]!r} do not include {ALG}")
        return True
    if setting is False:
        return False
    if isinstance(algs, list):
        return offered
    return challenged_dpop
