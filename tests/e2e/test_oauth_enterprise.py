"""A workflow with the enterprise grant (SEP-990) against the loopback protected server and its IdP
(:mod:`tests.fakes.oauth_server`): the ID token is exchanged for an ID-JAG, the ID-JAG for an access token,
the call runs, and neither the ID token, the ID-JAG, the client secret nor the access token appears on the
console, in ``--json`` or in the run's files. An ID token the IdP refuses fails the run clearly (exit 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.support import OAUTH_ID_TOKEN as ID_TOKEN
from tests.e2e.support import OAUTH_SECRET as SECRET
from tests.e2e.support import everything_written, mcp_run

pytestmark = pytest.mark.integration


WORKFLOW = """\
version: 1
servers:
  wiki:
    url: {origin}/mcp
    auth:
      grant: enterprise
      client_id: ci-bot
      client_secret: $OAUTH_CLIENT_SECRET
      id_token: $IDP_ID_TOKEN
      idp_token_url: {origin}/idp/token
      idp_client_id: agent-at-idp
steps:
  hello:
    server: wiki
    tool: echo
    args: {{greeting: hello}}
"""


def _workflow(tmp_path: Path, origin: str) -> Path:
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW.format(origin=origin), encoding="utf-8")
    return workflow


def test_the_enterprise_grant_runs_and_shows_no_secret(oauth_loopback: tuple[str, Path], tmp_path: Path) -> None:
    origin, tokens = oauth_loopback
    env = {"OAUTH_CLIENT_SECRET": SECRET, "IDP_ID_TOKEN": ID_TOKEN}
    state = str(tmp_path / "state")
    result = mcp_run(str(_workflow(tmp_path, origin)), "--state-dir", state, "--json", env=env, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout
    issued = tokens.read_text(encoding="utf-8").split()
    assert any(t.startswith("id-jag-") for t in issued) and any(t.startswith("access-") for t in issued)
    written = everything_written(tmp_path)
    for text in (result.stdout, result.stderr, written):
        for secret in (SECRET, ID_TOKEN, *issued):
            assert secret not in text
            assert json.dumps(secret)[1:-1] not in text


def test_an_id_token_the_idp_refuses_fails_clearly(oauth_loopback: tuple[str, Path], tmp_path: Path) -> None:
    origin, _ = oauth_loopback
    stale = "eyJhbGciOiJFUzI1NiJ9.an-expired-sign-in.c2ln"
    env = {"OAUTH_CLIENT_SECRET": SECRET, "IDP_ID_TOKEN": stale}
    result = mcp_run(str(_workflow(tmp_path, origin)), "--state-dir", str(tmp_path / "state"), env=env, timeout=90)
    assert result.returncode == 4, (result.stdout, result.stderr)
    output = result.stdout + result.stderr
    assert "the IdP refused the token exchange for an ID-JAG (400, invalid_grant: the ID token has expired)" in output
    assert stale not in output + everything_written(tmp_path)
    assert "Traceback" not in result.stderr


def test_call_takes_the_enterprise_grant_as_flags(oauth_loopback: tuple[str, Path], tmp_path: Path) -> None:
    origin, tokens = oauth_loopback
    env = {"OAUTH_CLIENT_SECRET": SECRET, "IDP_ID_TOKEN": ID_TOKEN}
    flags = ["--auth", "enterprise", "--client-id", "ci-bot", "--client-secret", "$OAUTH_CLIENT_SECRET"]
    flags += ["--id-token", "$IDP_ID_TOKEN", "--idp-token-url", f"{origin}/idp/token", "--idp-client-id", "agent"]
    result = mcp_run("call", *flags, "--tool", "echo", "--args", '{"x": 1}', f"{origin}/mcp", env=env, timeout=90)
    assert result.returncode == 0, result.stderr
    assert '"x": 1' in result.stdout
    for secret in (SECRET, ID_TOKEN, *tokens.read_text(encoding="utf-8").split()):
        assert secret not in result.stdout + result.stderr


def test_call_with_the_enterprise_grant_but_no_id_token_is_a_usage_error(tmp_path: Path) -> None:
    flags = ["--auth", "enterprise", "--client-id", "ci-bot", "--idp-token-url", "https://idp.example.com/token"]
    result = mcp_run("call", *flags, "--tool", "echo", "https://mcp.example.com/mcp", timeout=60)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "--auth enterprise needs --client-id and --id-token" in result.stderr
