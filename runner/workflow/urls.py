"""Server URLs known before a run (a ``url`` without templates): what is wrong with one, said without ever
repeating its user, password or query (any of them may be a secret)."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["url_problem"]

_CREDENTIALS_HINT = (
    'put credentials in a header, from the environment: headers: {Authorization: "Bearer ${{ env.TOKEN }}"}'
)


def url_problem(url: str, credentials_hint: str = _CREDENTIALS_HINT) -> tuple[str, str | None] | None:
    """What is wrong with a server URL known before the run, and a hint: None when it is ``http://`` or
    ``https://`` with a host and no credentials. Messages never repeat the URL's user, password or query
    (any of them may be a secret); ``credentials_hint`` says where credentials go instead."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # parsing it is the check
    except ValueError as exc:
        return f"invalid URL {_shown_url(url)!r}: {exc}", None
    if parts.scheme.lower() not in ("http", "https"):
        hint = f"start it with https:// or http://, as in https://{_shown_url(url)}" if "://" not in url else None
        return f"expected an http:// or https:// URL, found {_shown_url(url)!r}", hint
    if "@" in parts.netloc:
        return (
            "the URL carries credentials (user:password@); URLs are shown and logged, so mcp-run refuses them",
            f"write {_shown_url(url)!r} and {credentials_hint}",
        )
    if not parts.hostname:
        return f"the URL has no host: {_shown_url(url)!r}", "write http://HOST:PORT/PATH"
    return None


def _shown_url(url: str) -> str:
    """``url`` without user, password, query and fragment."""
    text = url.split("#", 1)[0].split("?", 1)[0]
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    authority, slash, path = rest.partition("/")
    return f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{path}"
