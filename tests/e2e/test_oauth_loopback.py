"""A workflow against a loopback protected MCP server, with client credentials from the environment: it runs,
and neither the client secret nor any token the authorization server issued appears on the console, in
``--json`` or in the run's files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.support import OAUTH_SECRET as SECRET
from tests.e2e.support import everything_written, mcp_run

WORKFLOW = """\
version: 1
servers:
  api:
    url: {origin}/mcp
    auth:
      client_id: ci-bot
      client_secret: $OAUTH_CLIENT_SECRET
steps:
  hello:
    server: api
    tool: echo
    args: {{greeting: hello}}
"""


def test_workflow_with_client_credentials_from_the_environment(
    oauth_loopback: tuple[str, Path], tmp_path: Path
) -> None:
    origin, tokens = oauth_loopback
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW.format(origin=origin), encoding="utf-8")
    state = str(tmp_path / "state")
    env = {"OAUTH_CLIENT_SECRET": SECRET}
    result = mcp_run(str(workflow), "--state-dir", state, "--json", env=env, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout
    issued = tokens.read_text(encoding="utf-8").split()
    assert issued, "the authorization server issued no token"
    written = everything_written(tmp_path)
    for text in (result.stdout, result.stderr, written):
        for secret in (SECRET, *issued):
            assert secret not in text
            assert json.dumps(secret)[1:-1] not in text


def test_a_wrong_secret_fails_clearly_without_showing_it(oauth_loopback: tuple[str, Path], tmp_path: Path) -> None:
    origin, _ = oauth_loopback
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW.format(origin=origin), encoding="utf-8")
    result = mcp_run(
        str(workflow), "--state-dir", str(tmp_path / "state"), env={"OAUTH_CLIENT_SECRET": "wrong-9876"}, timeout=90
    )
    assert result.returncode == 4, (result.stdout, result.stderr)
    assert "invalid_client" in result.stdout + result.stderr
    assert "wrong-9876" not in result.stdout + result.stderr + everything_written(tmp_path)
    assert "Traceback" not in result.stderr
