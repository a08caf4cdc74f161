"""``--protocol-version`` and a server's ``protocol:`` end to end, against the stdio fake of
``tests/fakes/mcp_modes.py`` (a 2025 server: it answers ``server/discover`` with -32601)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.e2e.support import MODES, mcp_run, run_cli


def test_auto_falls_back_to_the_handshake_of_a_2025_server() -> None:
    result = mcp_run(
        "call", "--tool", "echo", "--args", '{"text": "hi"}', "--", sys.executable, MODES, "ok", timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_a_pinned_2026_version_against_a_2025_server_is_exit_4_and_says_why() -> None:
    args = ("call", "--protocol-version", "2026-07-28", "--tool", "echo", "--args", "{}")
    result = mcp_run(*args, "--", sys.executable, MODES, "ok", timeout=60)
    assert result.returncode == 4, result.stderr
    assert result.stderr.splitlines()[0] == (
        "mcp-run: error: could not connect: protocol 2026-07-28 was asked for (--protocol-version or the server's "
        "'protocol:'), but the server does not speak it: server/discover: server error -32601: no"
    )


def test_a_version_nobody_speaks_is_a_usage_error() -> None:
    result = mcp_run("tools", "--protocol-version", "2030-01-01", "--", sys.executable, MODES, "ok")
    assert result.returncode == 2
    assert "--protocol-version" in result.stderr


def _workflow(tmp: Path, protocol: str) -> Path:
    path = tmp / "flow.yaml"
    command = json.dumps([sys.executable, str(MODES), "ok"])
    path.write_text(
        f"""
version: 1
servers:
  old:
    command: {command}
    protocol: {json.dumps(protocol)}
steps:
  hello:
    server: old
    tool: echo
    args: {{text: hi}}
"""
    )
    return path


def test_a_servers_protocol_pins_it_and_the_command_line_overrides_it(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    pinned = run_cli(tmp_path, "run", str(_workflow(tmp_path, "2026-07-28")), "--state-dir", state, "--no-progress")
    assert pinned.returncode == 4, pinned.stderr
    assert "protocol 2026-07-28 was asked for" in pinned.stderr
    overridden = run_cli(
        tmp_path,
        "run",
        str(_workflow(tmp_path, "2026-07-28")),
        "--new-run",
        "--protocol-version",
        "2025-11-25",
        "--state-dir",
        state,
        "--no-progress",
    )
    assert overridden.returncode == 0, overridden.stderr
