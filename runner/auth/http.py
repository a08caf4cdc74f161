"""The few HTTP exchanges of authorization: fetching metadata, posting to the token endpoint, registering.

Each runs on a short-lived ``httpx2.AsyncClient`` (the exchanges are rare: once per token), never follows
redirects, is bounded in time, and turns every failure into ``AuthFailed`` with a message that names the
URL without its query and never the request's body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx2
import trio

from runner.auth.errors import AuthFailed

__all__ = ["AUTH_TIMEOUT", "Answer", "AuthHttp"]

AUTH_TIMEOUT: Final = 30.0
_BODY_LIMIT: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Answer:
    """A POST's answer: its status, its JSON (``None`` if none) and its headers (lower-case names)."""

    status: int
    data: Any
    headers: Mapping[str, str]


def _where(url: str) -> str:
    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL:
        return "(an invalid URL)"
    return str(parsed.copy_with(query=None, fragment=None, username=None, password=None))


class AuthHttp:
    """HTTP for authorization; ``transport`` injects one (tests: ``httpx2.MockTransport``)."""

    def __init__(self, *, transport: httpx2.AsyncBaseTransport | None = None, timeout: float = AUTH_TIMEOUT) -> None:
        self._transport = transport
        self._timeout = timeout

    def _client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=self._transport, timeout=self._timeout, follow_redirects=False)

    async def get_json(self, url: str, headers: Mapping[str, str] | None = None) -> Any | None:
        """The JSON document at ``url``, or ``None`` when the server has none there (4xx, not JSON)."""
        try:
            with trio.fail_after(self._timeout):
                async with self._client() as client:
                    response = await client.get(url, headers={"Accept": "application/json", **(headers or {})})
        except (httpx2.HTTPError, trio.TooSlowError) as exc:
            raise AuthFailed(f"cannot fetch {_where(url)}: {type(exc).__name__}") from None
        if response.status_code >= 500:
            raise AuthFailed(f"{_where(url)} answered {response.status_code}")
        if response.status_code != 200:
            return None
        try:
            return json.loads(response.content[:_BODY_LIMIT])
        except (ValueError, UnicodeDecodeError):
            return None

    async def post(
        self, url: str, *, form: Mapping[str, str] | None = None, body: Any = None, headers: Mapping[str, str]
    ) -> tuple[int, Any]:
        """POST a form (or a JSON ``body``) and return the status and the answer's JSON (``None`` if none)."""
        answer = await self.exchange(url, form=form, body=body, headers=headers)
        return answer.status, answer.data

    async def exchange(
        self, url: str, *, form: Mapping[str, str] | None = None, body: Any = None, headers: Mapping[str, str]
    ) -> Answer:
        """:meth:`post`, with the answer's headers (a token endpoint's ``DPoP-Nonce``)."""
        try:
            with trio.fail_after(self._timeout):
                async with self._client() as client:
                    if form is not None:
                        response = await client.post(url, data=dict(form), headers=dict(headers))
                    else:
                        response = await client.post(url, json=body, headers=dict(headers))
        except (httpx2.HTTPError, trio.TooSlowError) as exc:
            raise AuthFailed(f"cannot reach {_where(url)}: {type(exc).__name__}") from None
        try:
            data = json.loads(response.content[:_BODY_LIMIT]) if response.content else None
        except (ValueError, UnicodeDecodeError):
            data = None
        return Answer(response.status_code, data, dict(response.headers))

    async def get_location(self, url: str) -> str | None:
        """GET ``url`` without following a redirect; the ``Location`` it redirects to (a headless
        authorization: the conformance suite's authorization server redirects at once)."""
        try:
            with trio.fail_after(self._timeout):
                async with self._client() as client:
                    response = await client.get(url)
        except (httpx2.HTTPError, trio.TooSlowError) as exc:
            raise AuthFailed(f"cannot reach {_where(url)}: {type(exc).__name__}") from None
        location = response.headers.get("location")
        return location if isinstance(location, str) else None
