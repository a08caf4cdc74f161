"""Tokens: reading a token endpoint's answer, and the cache shared by every connection of a process.

The cache is keyed by issuer, client and resource: two servers behind one authorization server with the
same client share nothing unless they are the same resource. The client's part names whom the token is for
(the provider adds the subject a grant asks for and the DPoP key it is bound to, digests, never secrets).
``repr`` of a token never shows it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runner.auth.errors import AuthFailed

__all__ = ["EXPIRY_MARGIN", "Token", "TokenCache", "parse_token_response"]

EXPIRY_MARGIN: Final = 30.0
"""A token this close to its expiry (seconds) is renewed before use."""


@dataclass(frozen=True, slots=True, repr=False)
class Token:
    access_token: str
    token_type: str = "Bearer"
    expires_at: float = math.inf
    refresh_token: str | None = None
    scope: str | None = None

    @property
    def bound(self) -> bool:
        """A DPoP-bound token (RFC 9449): sent as ``DPoP``, each request with a proof of the run's key."""
        return self.token_type == "DPoP"

    def header(self) -> str:
        return f"{self.token_type} {self.access_token}"

    def fresh(self, now: float | None = None) -> bool:
        current = time.time() if now is None else now
        return current + EXPIRY_MARGIN < self.expires_at

    def __repr__(self) -> str:
        return f"Token(type={self.token_type!r}, expires_at={self.expires_at!r}, scope={self.scope!r})"


def parse_token_response(
    data: Any, *, now: float | None = None, previous_refresh: str | None = None, dpop: bool = False
) -> Token:
    """A successful token response (RFC 6749 section 5.1); ``AuthFailed`` when it is not one. A response
    without a ``refresh_token`` keeps ``previous_refresh`` (servers need not rotate it). ``dpop``: the
    request carried a DPoP proof, so a ``DPoP`` token may come back; a ``Bearer`` one still may (the server
    chose not to bind it, RFC 9449 section 5)."""
    if not isinstance(data, Mapping):
        raise AuthFailed("the token endpoint answered something that is not a JSON object")
    access = data.get("access_token")
    if not isinstance(access, str) or not access:
        raise AuthFailed("the token endpoint's answer has no access_token")
    token_type = data.get("token_type", "Bearer")
    kinds = ("bearer", "dpop") if dpop else ("bearer",)
    if not isinstance(token_type, str) or token_type.lower() not in kinds:
        supported = "Bearer and DPoP tokens" if dpop else "Bearer tokens (no DPoP proof was sent)"
        raise AuthFailed(f"the token endpoint issued a {token_type!r} token; only {supported} are supported")
    refresh = data.get("refresh_token")
    scope = data.get("scope")
    return Token(
        access,
        "DPoP" if token_type.lower() == "dpop" else "Bearer",
        _expires_at(data.get("expires_in"), time.time() if now is None else now),
        refresh if isinstance(refresh, str) and refresh else previous_refresh,
        scope if isinstance(scope, str) else None,
    )


def _expires_at(expires_in: Any, now: float) -> float:
    """When a token issued ``now`` expires: never (inf) when ``expires_in`` is not a finite number."""
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and math.isfinite(expires_in):
        return now + float(expires_in)
    return math.inf


def token_error(data: Any) -> str:
    """``invalid_client: bad secret`` from a token endpoint's error answer (RFC 6749 section 5.2), cut short;
    the server's text, never our request."""
    if isinstance(data, Mapping) and isinstance(data.get("error"), str):
        text = str(data["error"])
        description = data.get("error_description")
        if isinstance(description, str) and description:
            text += f": {description}"
        return text[:200]
    return "no error code"


class TokenCache:
    """Tokens by (issuer, client id, resource), for one process."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str, str], Token] = {}

    def get(self, issuer: str, client_id: str, resource: str) -> Token | None:
        return self._tokens.get((issuer, client_id, resource))

    def put(self, issuer: str, client_id: str, resource: str, token: Token) -> None:
        self._tokens[(issuer, client_id, resource)] = token

    def drop(self, issuer: str, client_id: str, resource: str) -> None:
        self._tokens.pop((issuer, client_id, resource), None)


SHARED_CACHE: Final = TokenCache()
