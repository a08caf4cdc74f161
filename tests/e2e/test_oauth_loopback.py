"""A workflow against a loopback protected MCP server, with client credentials from the environment: it runs,
and neither the client secret nor any token the authorization server issued appears on the console, in
``--json`` or in the run's files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import ROOT, mcp_run

SECRET = "loopback-client-secret-4711"
SERVER = ROOT / "tests" / "fakes" / "oauth_server.py"

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


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    tokens = tmp_path / "issued-tokens.txt"
    env = {**os.environ, "OAUTH_TEST_SECRET": SECRET, "OAUTH_TEST_TOKENS": str(tokens)}
    process = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        origin = process.stdout.readline().strip()
        assert origin.startswith("http://127.0.0.1:"), origin
        yield origin, tokens
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _everything_written(tmp_path: Path) -> str:
    texts = []
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def test_workflow_with_client_credentials_from_the_environment(loopback: tuple[str, Path], tmp_path: Path) -> None:
    origin, tokens = loopback
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW.format(origin=origin), encoding="utf-8")
    state = str(tmp_path / "state")
    env = {"OAUTH_CLIENT_SECRET": SECRET}
    result = mcp_run(str(workflow), "--state-dir", state, "--json", env=env, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "hello" in result.stdout
    issued = tokens.read_text(encoding="utf-8").split()
    assert issued, "the authorization server issued no token"
    written = _everything_written(tmp_path)
    for text in (result.stdout, result.stderr, written):
        for secret in (SECRET, *issued):
            assert secret not in text
            assert json.dumps(secret)[1:-1] not in text


def test_a_wrong_secret_fails_clearly_without_showing_it(loopback: tuple[str, Path], tmp_path: Path) -> None:
    origin, _ = loopback
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW.format(origin=origin), encoding="utf-8")
    result = mcp_run(
        str(workflow), "--state-dir", str(tmp_path / "state"), env={"OAUTH_CLIENT_SECRET": "wrong-9876"}, timeout=90
    )
    assert result.returncode == 4, (result.stdout, result.stderr)
    assert "invalid_client" in result.stdout + result.stderr
    assert "wrong-9876" not in result.stdout + result.stderr + _everything_written(tmp_path)
    assert "Traceback" not in result.stderr
