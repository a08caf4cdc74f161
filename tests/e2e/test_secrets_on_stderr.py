"""A stdio server that prints a multi-line secret on stderr and crashes: no line of it reaches the console,
the journal or ``show``, though the rest of its stderr does (the tail is masked raw, before it is indented
and its lines cut)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.support import ROOT, mcp_run

# A private key's shape: lines of every length, one longer than a stderr line is shown (300 characters), a
# tab, a quote and a backslash (escaped when shown).
SECRET = "\n".join(
    [
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" * 8,
        'tab\there "quoted" back\\slash',
        "ok",
        "-----END OPENSSH PRIVATE KEY-----",
    ]
)
WORKFLOW = """\
version: 1
servers:
  leaky:
    command: [{python}, {server}, {when}]
    env: {{LEAK: "${{{{ env.MCP_RUN_T_LEAK }}}}"}}
    reconnect: false
steps:
  greet:
    server: leaky
    tool: echo
    args: {{text: hello}}
"""


def shown(text: str) -> list[str]:
    """The lines of the secret (longer than 3 characters) found in ``text``, raw or JSON-escaped, and any
    12 characters of one (a line cut short shows a part of it)."""
    lines = [line.strip() for line in SECRET.splitlines() if len(line.strip()) > 3]
    parts = lines + [line[i : i + 12] for line in lines for i in range(0, len(line) - 11, 4)]
    return [part for part in parts if part in text or json.dumps(part)[1:-1] in text]


@pytest.mark.parametrize(("when", "code"), [("init", 4), ("call", 5)])
def test_a_secret_a_crashing_server_prints_on_stderr_is_shown_nowhere(tmp_path: Path, when: str, code: int) -> None:
    workflow = tmp_path / "flow.yaml"
    server = ROOT / "tests" / "fakes" / "stdio_leaky.py"
    workflow.write_text(WORKFLOW.format(python=json.dumps(sys.executable), server=json.dumps(str(server)), when=when))
    state = str(tmp_path / "state")
    env = {"MCP_RUN_T_LEAK": SECRET}
    result = mcp_run(str(workflow), "--state-dir", state, env=env)
    assert result.returncode == code, result.stderr
    console = result.stdout + result.stderr
    journal = next((tmp_path / "state" / "runs").glob("*/journal.jsonl")).read_text()
    show = mcp_run("show", str(workflow), "--state-dir", state, env=env)
    logs = mcp_run("logs", str(workflow), "--state-dir", state, env=env)
    assert show.returncode == 0 and logs.returncode == 0
    outputs = {"console": console, "journal": journal, "show": show.stdout + show.stderr, "logs": logs.stdout}
    assert {name: shown(text) for name, text in outputs.items() if shown(text)} == {}
    # The server's last words are there, the secret masked in them: the tail was not dropped to hide it.
    assert "the key above is not valid" in console and "config = ***env.MCP_RUN_T_LEAK***" in console
