"""MCP authorization discovery, without I/O: what to fetch, in which order, and what to accept.

- :func:`parse_challenge` reads a ``WWW-Authenticate: Bearer ...`` (or ``DPoP ...``) header
  (``resource_metadata``, ``scope``, ``error``).
- :func:`resource_metadata_urls`: the protected-resource metadata (RFC 9728) locations to try: the
  header's URL, then the path-based well-known URL, then the root one.
- :func:`check_resource`: the metadata's ``resource`` must name the server (same origin, and the
  server's path at or below the resource's).
- :func:`server_metadata_urls`: the authorization-server metadata locations (RFC 8414, then OpenID
  Connect), for an issuer with or without a path; :func:`check_issuer`: the ``issuer`` exactly.
- :func:`check_endpoint`: authorization-server endpoints must be https, except on loopback.
- :func:`choose_scope`: the scope to ask for.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from runner.auth.errors import AuthFailed

__all__ = [
    "Challenge",
    "check_endpoint",
    "check_issuer",
    "check_resource",
    "choose_scope",
    "is_loopback",
    "parse_challenge",
    "resource_metadata_urls",
    "server_metadata_urls",
]

# auth-param = token BWS "=" BWS ( token / quoted-string )   (RFC 9110 section 11.2)
_PARAM = re.compile(r'\s*([!#$%&\'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')


@dataclass(frozen=True, slots=True)
class Challenge:
    """The Bearer or DPoP challenge of a ``WWW-Authenticate`` header (all ``None`` when there is none);
    ``scheme`` is ``bearer`` or ``dpop``."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    scheme: str | None = None


def parse_challenge(header: str | None, *, prefer: str = "bearer") -> Challenge:
    """The ``Bearer`` or ``DPoP`` (RFC 9449 section 7.1) challenge's parameters from a ``WWW-Authenticate``
    value, the ``prefer`` scheme's when it has both; unreadable parts are skipped (a server's bad header
    never raises)."""
    if not header:
        return Challenge()
    for scheme in (prefer, "dpop" if prefer == "bearer" else "bearer"):
        found = _parse_scheme(header, scheme)
        if found is not None:
            return found
    return Challenge()


def _parse_scheme(header: str, scheme: str) -> Challenge | None:
    match = re.search(rf"(?i)(?:^|,)\s*{scheme}(?:\s+|$)", header)
    if match is None:
        return None
    rest = header[match.end() :]
    params: dict[str, str] = {}
    position = 0
    while position < len(rest):
        m = _PARAM.match(rest, position)
        if m is None or m.end() == position:
            break
        name, value = m.group(1).lower(), m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params.setdefault(name, value)
        position = m.end()
        # another scheme starts ("Bearer a=b, Basic realm=x"): stop at a bare token followed by a space
        if re.match(r"\s*[A-Za-z][\w-]*\s+[\w-]+=", rest[position:]):
            break
    return Challenge(params.get("resource_metadata"), params.get("scope"), params.get("error"), params, scheme)


def _split(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower(), parts.path


def resource_metadata_urls(server_url: str, header_url: str | None) -> list[str]:
    """Where to look for the protected-resource metadata, in order."""
    scheme, netloc, path = _split(server_url)
    urls = [header_url] if header_url else []
    path = path.rstrip("/")
    if path:
        urls.append(f"{scheme}://{netloc}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{scheme}://{netloc}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def canonical_resource(url: str) -> str:
    """The server URL as a resource indicator (RFC 8707): scheme and host in lower case, no fragment,
    no query, no trailing slash."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


def check_resource(resource: str, server_url: str) -> None:
    """Raise ``AuthFailed`` unless ``resource`` (from the metadata) names the server at ``server_url``."""
    r_scheme, r_netloc, r_path = _split(canonical_resource(resource))
    s_scheme, s_netloc, s_path = _split(canonical_resource(server_url))
    r_path = r_path.rstrip("/")
    if (r_scheme, r_netloc) == (s_scheme, s_netloc) and (s_path == r_path or s_path.startswith(r_path + "/")):
        return
    raise AuthFailed(
        f"the protected-resource metadata names the resource {resource!r}, not this server "
        f"({canonical_resource(server_url)}): no token is sent to it"
    )


def server_metadata_urls(issuer: str) -> list[str]:
    """The authorization-server metadata locations of ``issuer``: RFC 8414, then OpenID Connect."""
    scheme, netloc, path = _split(issuer)
    path = path.rstrip("/")
    if not path:
        return [
            f"{scheme}://{netloc}/.well-known/oauth-authorization-server",
            f"{scheme}://{netloc}/.well-known/openid-configuration",
        ]
    return [
        f"{scheme}://{netloc}/.well-known/oauth-authorization-server{path}",
        f"{scheme}://{netloc}/.well-known/openid-configuration{path}",
        f"{scheme}://{netloc}{path}/.well-known/openid-configuration",
    ]


def check_issuer(metadata: Mapping[str, Any], issuer: str) -> None:
    """The metadata's ``issuer`` must be exactly the issuer it was fetched for (RFC 8414 section 3.3)."""
    found = metadata.get("issuer")
    if found != issuer:
        raise AuthFailed(f"the authorization server metadata names the issuer {found!r}, expected {issuer!r}")


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(url: object, what: str) -> str:
    """``url`` when it is an https URL (or http on loopback); else ``AuthFailed``."""
    if not isinstance(url, str) or not url:
        raise AuthFailed(f"the authorization server gave no usable {what}")
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return url
    raise AuthFailed(f"the {what} {parts.scheme}://{parts.hostname or ''} must use https (http only on loopback)")


def choose_scope(
    configured: Sequence[str],
    challenge_scope: str | None,
    scopes_supported: object,
    *,
    extra: Sequence[str] = (),
) -> str | None:
    """The ``scope`` parameter: the configured scopes, else the challenge's, else the resource's
    ``scopes_supported``; ``None`` (omitted) when none is known. ``extra`` (e.g. a step-up's) is added."""
    scopes: list[str] = list(configured)
    if not scopes and challenge_scope:
        scopes = challenge_scope.split()
    if not scopes and isinstance(scopes_supported, list):
        scopes = [s for s in scopes_supported if isinstance(s, str)]
    for scope in extra:
        if scope not in scopes:
            scopes.append(scope)
    return " ".join(scopes) if scopes else None
