"""The seam between the Streamable HTTP transport and an authorization provider (:mod:`runner.auth`).

The transport knows nothing of OAuth. It asks the hook for the ``Authorization`` value of each request
(:meth:`AuthHook.header`) and, when a POST is answered 401 or 403, hands it the status and the
``WWW-Authenticate`` header (:meth:`AuthHook.challenged`). A 401 or 403 means the server refused the
request before running it, so sending it again with a new token is safe: that re-send happens inside
``send`` and the session never sees the refusal. When the hook cannot authorize it raises an error that
says the request was not sent (a ``ConnectFailed``), never one that puts the call in doubt.
"""

from __future__ import annotations

from typing import Final, Protocol

__all__ = ["MAX_AUTH_RETRIES", "AuthHook"]

MAX_AUTH_RETRIES: Final = 4
"""Re-sends of one POST after 401/403 (the hook has its own, smaller limits; this bounds a faulty one)."""


class AuthHook(Protocol):
    def header(self) -> str | None:
        """The ``Authorization`` header value to send now (``Bearer ...``), or ``None`` for none yet."""
        ...

    async def challenged(self, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        """The server answered ``status`` (401 or 403) to a request that carried ``sent`` as its
        ``Authorization``. Return True when a new header is ready and the request should be sent again,
        False to give up (the caller raises the HTTP error). May raise ``ConnectFailed``."""
        ...
