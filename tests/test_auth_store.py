"""The token store (mode 0600, one entry per issuer and client) and the ``login`` grant that reads it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from runner.auth.config import AuthConfig
from runner.auth.errors import LoginRequired
from runner.auth.provider import OAuthProvider
from runner.auth.store import StoredLogin, TokenStore, default_store_path
from runner.auth.tokens import TokenCache
from runner.errors import ConnectFailed
from runner.exitcodes import ExitCode
from tests.auth_world import CHALLENGE, ISSUER, MCP_URL, AuthWorld, Issued, provider, session_with


def test_store_is_private_and_keyed_by_issuer_and_client(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "state" / "tokens.json")
    store.save(StoredLogin(MCP_URL, ISSUER, "a", "refresh-1"))
    store.save(StoredLogin(MCP_URL, ISSUER, "a", "refresh-2"))  # the same issuer and client: replaced
    store.save(StoredLogin(MCP_URL, ISSUER, "b", "refresh-3"))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert [(login.client_id, login.refresh_token) for login in store.logins()] == [
        ("a", "refresh-2"),
        ("b", "refresh-3"),
    ]
    assert "refresh" not in repr(store.find(MCP_URL))
    assert store.remove(MCP_URL) == 2
    assert store.find(MCP_URL) is None


def test_a_store_made_readable_by_others_is_made_private_again(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    store.save(StoredLogin(MCP_URL, ISSUER, "a", "refresh-1"))
    os.chmod(store.path, 0o644)
    assert store.find(MCP_URL) is not None
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_default_path_is_under_the_state_directory(tmp_path: Path) -> None:
    assert default_store_path({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "mcp-run" / "tokens.json"
    assert default_store_path({"MCP_RUN_TOKEN_STORE": "/x/t.json"}) == Path("/x/t.json")


def _login_provider(world: AuthWorld, store: TokenStore) -> OAuthProvider:
    return provider(world, AuthConfig(grant="login"), store=store)


async def test_login_grant_refreshes_silently_and_keeps_the_rotated_token(tmp_path: Path) -> None:
    world = AuthWorld()
    world.refresh["refresh-stored"] = Issued({"mcp:read"}, "cli-app")
    store = TokenStore(tmp_path / "tokens.json")
    store.save(StoredLogin(MCP_URL, ISSUER, "cli-app", "refresh-stored"))
    async with session_with(world, _login_provider(world, store)) as session:
        await session.call_tool("echo", {})
    [form] = world.token_requests
    assert form["grant_type"] == "refresh_token" and form["client_id"] == "cli-app"
    login = store.find(MCP_URL)
    assert login is not None and login.refresh_token != "refresh-stored"  # rotated, and kept
    assert login.refresh_token in world.refresh


async def test_no_stored_login_says_which_command_to_run(tmp_path: Path) -> None:
    world = AuthWorld()
    with pytest.raises(ConnectFailed) as caught:
        async with session_with(world, _login_provider(world, TokenStore(tmp_path / "tokens.json"))):
            pass
    assert f"run: mcp-run login {MCP_URL}" in str(caught.value)
    assert caught.value.exit_code == ExitCode.UNREACHABLE


async def test_a_revoked_login_says_which_command_to_run(tmp_path: Path) -> None:
    world = AuthWorld()
    store = TokenStore(tmp_path / "tokens.json")
    store.save(StoredLogin(MCP_URL, ISSUER, "cli-app", "refresh-revoked"))
    with pytest.raises(ConnectFailed, match="mcp-run login"):
        async with session_with(world, _login_provider(world, store)):
            pass
    assert isinstance(LoginRequired(MCP_URL, "x"), ConnectFailed)


async def test_a_persons_login_is_not_taken_from_the_cache_as_the_clients_own_token(tmp_path: Path) -> None:
    """One process, one client id: the token of a person's stored login (grant ``login``) is theirs; a server
    with the client_credentials grant for that client asks for its own."""
    world = AuthWorld()
    world.refresh["refresh-stored"] = Issued({"mcp:read"}, "ci-bot")
    store = TokenStore(tmp_path / "tokens.json")
    store.save(StoredLogin(MCP_URL, ISSUER, "ci-bot", "refresh-stored"))
    cache = TokenCache()
    person = provider(world, AuthConfig(grant="login"), store=store, cache=cache)
    await person.challenged(401, CHALLENGE, {})
    client = provider(world, AuthConfig(client_id="ci-bot", client_secret="s3cret-value-123"), cache=cache)
    await client.challenged(401, CHALLENGE, {})
    assert [f["grant_type"] for f in world.token_requests] == ["refresh_token", "client_credentials"]
    assert person.header() != client.header()


def test_damaged_entries_are_skipped_not_a_traceback(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "state" / "tokens.json")
    store.save(StoredLogin(MCP_URL, ISSUER, "a", "refresh-1"))
    import json

    data = json.loads(store.path.read_text(encoding="utf-8"))
    data["logins"]["junk"] = ["not", "an", "object"]
    data["logins"]["typed"] = {"server_url": MCP_URL, "issuer": 5, "client_id": "b", "refresh_token": "r"}
    store.path.write_text(json.dumps(data), encoding="utf-8")
    assert [login.client_id for login in store.logins()] == ["a"]
    assert store.find(MCP_URL) is not None
