"""The per-user token store of ``mcp-run login``: one refresh token per issuer and client.

A JSON file, ``$MCP_RUN_TOKEN_STORE`` or ``$XDG_STATE_HOME/mcp-run/tokens.json`` (by default
``~/.local/state/mcp-run/tokens.json``): under the user's state directory, never in a repository. The file
is written whole (a temporary file, then a rename) with mode 0600 in a directory of mode 0700; a file found
readable by others is made private again before it is read. Access tokens are not stored: a run gets a
fresh one by refreshing.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from runner.auth.errors import AuthFailed

__all__ = ["STORE_ENV", "StoredLogin", "TokenStore", "default_store_path"]

STORE_ENV: Final = "MCP_RUN_TOKEN_STORE"


def default_store_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(STORE_ENV):
        return Path(env[STORE_ENV]).expanduser()
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "mcp-run" / "tokens.json"


@dataclass(frozen=True, slots=True, repr=False)
class StoredLogin:
    """One login: the server it was made for, its issuer and client, and the refresh token."""

    server_url: str
    issuer: str
    client_id: str
    refresh_token: str
    client_secret: str | None = None
    scope: str | None = None

    def key(self) -> str:
        return f"{self.issuer} {self.client_id}"

    def __repr__(self) -> str:
        return f"StoredLogin(server_url={self.server_url!r}, issuer={self.issuer!r}, client_id={self.client_id!r})"


class TokenStore:
    """The store at ``path`` (see the module docstring)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_store_path()

    def _read(self) -> dict[str, Any]:
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise AuthFailed(f"cannot read the token store {self.path}: {exc.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            os.chmod(self.path, 0o600)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AuthFailed(
                f"the token store {self.path} is unreadable ({type(exc).__name__}): log in again"
            ) from None
        logins = data.get("logins") if isinstance(data, dict) else None
        return logins if isinstance(logins, dict) else {}

    def _write(self, logins: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "logins": dict(logins)}, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, self.path)

    def logins(self) -> list[StoredLogin]:
        found = (_login(entry) for entry in self._read().values())
        return [login for login in found if login is not None]

    def find(self, server_url: str, issuer: str | None = None) -> StoredLogin | None:
        """The login made for ``server_url`` (and ``issuer`` when given), the newest if several."""
        matches = [
            login
            for login in self.logins()
            if login.server_url.rstrip("/") == server_url.rstrip("/") and (issuer is None or login.issuer == issuer)
        ]
        return matches[-1] if matches else None

    def save(self, login: StoredLogin) -> None:
        logins = self._read()
        logins.pop(login.key(), None)
        logins[login.key()] = {k: v for k, v in asdict(login).items() if v is not None}
        self._write(logins)

    def remove(self, server_url: str) -> int:
        """Forget every login made for ``server_url``; returns how many."""
        logins = self._read()
        keep = {
            key: entry
            for key, entry in logins.items()
            if str(entry.get("server_url", "")).rstrip("/") != server_url.rstrip("/")
        }
        if len(keep) != len(logins):
            self._write(keep)
        return len(logins) - len(keep)


def _login(entry: Any) -> StoredLogin | None:
    """A stored entry as a login; None for a damaged one (hand-edited?), which is skipped, never a traceback."""
    if not isinstance(entry, dict):
        return None
    fields = {k: v for k, v in entry.items() if k in StoredLogin.__slots__}
    if not _texts(fields):
        return None
    try:
        return StoredLogin(**fields)
    except TypeError:
        return None


def _texts(fields: dict[str, Any]) -> bool:
    """Every field a string (``client_secret`` and ``scope`` may be null)."""
    if not all(isinstance(v, str) for k, v in fields.items() if k not in ("client_secret", "scope")):
        return False
    return all(v is None or isinstance(v, str) for v in fields.values())
