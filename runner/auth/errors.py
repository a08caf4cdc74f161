"""The errors of authorization: the request was never run (a ``ConnectFailed``, exit 4)."""

from __future__ import annotations

from runner.errors import ConnectFailed

__all__ = ["AuthFailed", "LoginRequired"]


class AuthFailed(ConnectFailed):
    """No token could be obtained, or the server keeps refusing the ones obtained. Nothing was run."""


class LoginRequired(AuthFailed):
    """A stored login is missing or no longer refreshes: a person must run ``mcp-run login URL``."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{reason}: a new login is needed; run: mcp-run login {url}")
        self.url = url
