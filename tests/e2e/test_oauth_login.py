"""``mcp-run login`` against the loopback authorization server of :mod:`tests.fakes.oauth_server`: the
authorization-code flow with PKCE and dynamic registration, the refresh token stored with mode 0600, later
commands refreshing silently, ``logout``, and the clear exit 4 when a new login is needed."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import httpx2

from tests.e2e.support import BIN, ROOT, mcp_run


def _login(url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``mcp-run login URL --no-browser`` and play the browser: open the URL it prints."""
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **env}
    process = subprocess.Popen(
        [sys.executable, "-m", "runner", "login", "--no-browser", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=full_env,
        cwd=ROOT,
    )
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.startswith("  http"):
            # the "browser": the authorization server redirects to the loopback callback at once
            response = httpx2.get(line.strip(), follow_redirects=True, timeout=30)
            assert response.status_code == 200
            assert "You can close this window" in response.text
            break
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, "".join(lines) + err)


def test_login_then_silent_refresh_then_logout(oauth_loopback: tuple[str, Path], tmp_path: Path) -> None:
    origin, tokens = oauth_loopback
    url = f"{origin}/mcp"
    store = tmp_path / "user-state" / "tokens.json"
    env = {"MCP_RUN_TOKEN_STORE": str(store)}

    result = _login(url, env)
    assert result.returncode == 0, result.stderr
    assert "logged in" in result.stderr
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
    issued = tokens.read_text(encoding="utf-8").split()
    access = [t for t in issued if t.startswith("access-")]
    stored = store.read_text(encoding="utf-8")
    assert "refresh-" in stored
    assert not any(token in stored for token in access)  # access tokens are never stored
    assert "code_challenge_method=S256" in result.stderr  # the printed authorization URL

    listed = mcp_run("tools", url, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert '"echo"' in listed.stdout
    issued = tokens.read_text(encoding="utf-8").split()
    for token in issued:
        assert token not in listed.stdout + listed.stderr

    out = mcp_run("logout", url, env=env)
    assert out.returncode == 0 and "forgot 1 login" in out.stderr

    again = mcp_run("tools", url, "--auth", "login", env=env)
    assert again.returncode == 4
    assert re.search(r"run: mcp-run login \S+/mcp", again.stderr), again.stderr
    assert "Traceback" not in again.stderr
