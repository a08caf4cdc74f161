"""`mcp-run tools` and `mcp-run call` end to end: output, and one exit code per failure kind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.support import ROOT, mcp_run

pytestmark = pytest.mark.integration

MODES = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_modes.py")


def call(mode: str, *extra: str) -> tuple[int, str, str]:
    result = mcp_run("call", "--tool", "echo", "--args", '{"text": "hello"}', *extra, "--", sys.executable, MODES, mode,
                     timeout=60)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr


def test_tools_lists_the_demo_server() -> None:
    result = mcp_run("tools", "--", sys.executable, "-m", "runner.demo")
    assert result.returncode == 0, result.stderr
    assert "convert_markdown" in result.stdout and "args: path: string, out_dir: string" in result.stdout
    raw = mcp_run("tools", "--json", "--", sys.executable, "-m", "runner.demo")
    assert {t["name"] for t in json.loads(raw.stdout)} >= {"list_markdown", "convert_markdown", "echo"}


def test_call_prints_progress_and_result(tmp_path: Path) -> None:
    args = json.dumps({"path": str(ROOT / "workflows/docs/quickstart.md"), "out_dir": str(tmp_path)})
    result = mcp_run("call", "--tool", "convert_markdown", "--args", args, "--json", "--", sys.executable, "-m",
                     "runner.demo")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["structuredContent"]["title"]
    assert "progress 4/4" in result.stderr


@pytest.mark.parametrize(
    ("mode", "code", "message"),
    [
        ("ok", 0, ""),
        ("tool-error", 1, "reported an error"),
        ("protocol-error", 3, "server error -32602: Unknown tool: nope"),
        ("bad-version", 3, "'1999-01-01'"),
        ("die-on-init", 4, "fatal: cannot load configuration"),
        ("die-on-call", 5, "connection lost after tools/call request"),
        ("garbage", 0, 'ignored a line on stdout that is not JSON-RPC (not JSON): "DEBUG: starting work"'),
        ("huge", 5, "exceeded the 1,048,576-byte cap"),  # the answer was lost: in doubt
    ],
)
def test_exit_code_per_failure_kind(mode: str, code: int, message: str) -> None:
    rc, out, err = call(mode, "--max-message-size", str(1 << 20), "--log-level", "debug")
    assert rc == code, err
    assert message in err
    if code == 0:
        assert out.strip() == "hello"


def test_silent_server_times_out_as_outcome_unknown() -> None:
    rc, _out, err = call("silent", "--timeout", "1")
    assert rc == 5 and "1 s timeout" in err


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("die-on-init", "could not initialize: server exited with code 3"),
        ("die-on-list", "could not list the tools: connection lost after tools/list request 2 was sent: server exited "
                        "with code 1"),
    ],
)  # fmt: skip
def test_tools_of_a_server_that_dies_is_unreachable_with_its_stderr(mode: str, message: str) -> None:
    result = mcp_run("tools", "--", sys.executable, MODES, mode, timeout=60)
    assert result.returncode == 4, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"mcp-run: error: {message}"
    assert lines[1] == "  server stderr (last lines):"
    assert lines[2] in ("    fatal: cannot load configuration", "    fatal: out of memory")


def test_a_url_with_credentials_is_a_usage_error() -> None:
    result = mcp_run("tools", "https://bot:hunter2@mcp.example.com/mcp")
    assert result.returncode == 2
    assert "hunter2" not in result.stderr
    assert result.stderr.splitlines() == [
        "mcp-run: error: URL: the URL carries credentials (user:password@); URLs are shown and logged, so mcp-run "
        "refuses them",
        "  hint: write 'https://mcp.example.com/mcp' and give credentials with --header 'Authorization: Bearer "
        "$TOKEN' (from the environment)",
    ]


def test_usage_errors() -> None:
    assert mcp_run("call", "--tool", "echo").returncode == 2  # no server
    result = mcp_run("call", "--tool", "echo", "--args", "[1]", "--", "x")
    assert result.returncode == 2 and "JSON object" in result.stderr
    result = mcp_run("tools", "ftp://example.com")
    assert result.returncode == 2


def typed_call(tool: str, args: str, count_file: Path) -> tuple[int, str, str]:
    result = mcp_run("call", "--tool", tool, "--args", args, "--", sys.executable, MODES, "typed", "--count-file",
                     str(count_file), timeout=60)  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr


def test_call_checks_arguments_as_a_run_does_and_sends_nothing_they_refuse(tmp_path: Path) -> None:
    """``call`` is a workflow of one step: wrong arguments exit 2 as ``plan --check`` does, and the server gets
    no tools/call (its count file records every call it received)."""
    calls = tmp_path / "calls.txt"
    rc, out, err = typed_call("convert", '{"path": "a.md", "out_dir": 3}', calls)
    assert rc == 2 and out == ""
    assert err.splitlines() == [
        "mcp-run: error: args.out_dir: 3 is not of type 'string' (refused by the inputSchema of convert; not sent)"
    ]
    assert not calls.exists()
    rc, out, _ = typed_call("convert", '{"path": "a.md", "out_dir": "out"}', calls)
    assert rc == 0 and json.loads(out) == {"out_dir": "out", "path": "a.md"}
    assert calls.read_text().splitlines() == ['convert {"out_dir": "out", "path": "a.md"}']


def test_call_of_an_unknown_tool_says_did_you_mean_and_sends_nothing(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    rc, _out, err = typed_call("get_curent_time", '{"timezone": "UTC"}', calls)
    assert rc == 2
    assert "has no tool 'get_curent_time'; did you mean 'get_current_time'?" in err.splitlines()[0]
    assert not calls.exists()
