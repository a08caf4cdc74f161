"""The seam between the Streamable HTTP transport and an authorization provider (:mod:`runner.auth`).

The transport knows nothing of OAuth. It asks the hook for the authorization headers of each request
(:meth:`AuthHook.headers`: ``Authorization``, and with a DPoP-bound token a fresh ``DPoP`` proof naming the
request's method) and, when a request is answered 401 or 403, hands it the status, the
``WWW-Authenticate`` and ``DPoP-Nonce`` headers and what it had sent (:meth:`AuthHook.challenged`). A 401
or 403 means the server refused the request before running it, so sending it again with a new token, or
with a proof carrying the nonce a DPoP server asked for (``use_dpop_nonce``), is safe: that re-send happens
inside ``send`` and the session never sees the refusal. When the hook cannot authorize it raises an error
that says the request was not sent (a ``ConnectFailed``), never one that puts the call in doubt.

:func:`answer_refusal` is how every request of the transport hands a refusal to the hook: a POST, the GET
that resumes a request's stream, and the session's standalone GET stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

__all__ = ["MAX_AUTH_RETRIES", "AuthHook", "answer_refusal"]

MAX_AUTH_RETRIES: Final = 4
"""Re-sends of one request after 401/403 (the hook has its own, smaller limits; this bounds a faulty one)."""

_SENT: Final = ("Authorization", "DPoP")
"""The headers of a request that the hook gave it (:meth:`AuthHook.headers`)."""


class AuthHook(Protocol):
    def headers(self, method: str) -> dict[str, str]:
        """The authorization headers of a request about to be sent with ``method`` to the server
        (``Authorization: Bearer ...``, or ``DPoP ...`` with its ``DPoP`` proof); empty for none yet."""
        ...

    async def challenged(
        self, status: int, www_authenticate: str | None, sent: Mapping[str, str], dpop_nonce: str | None = None
    ) -> bool:
        """The server answered ``status`` (401 or 403), with these ``WWW-Authenticate`` and ``DPoP-Nonce``
        headers, to a request that carried ``sent`` (what :meth:`headers` gave it). Return True when new
        headers are ready and the request should be sent again, False to give up (the caller raises the
        HTTP error). May raise ``ConnectFailed``."""
        ...

    def nonce(self, dpop_nonce: str) -> None:
        """An accepted request's answer carried ``DPoP-Nonce``: the nonce to put in the next proofs."""
        ...


async def answer_refusal(auth: AuthHook, status: int, answer: Mapping[str, str], sent: Mapping[str, str]) -> bool:
    """Hand a 401 or 403 to ``auth``: ``answer`` is the response's headers (looked up by lower-case name),
    ``sent`` the refused request's (what of them the hook gave it is passed on). True when new headers are
    ready and the request should be sent again (:meth:`AuthHook.challenged`); may raise ``ConnectFailed``."""
    return await auth.challenged(
        status,
        answer.get("www-authenticate"),
        {name: value for name, value in sent.items() if name in _SENT},
        answer.get("dpop-nonce"),
    )
