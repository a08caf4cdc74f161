"""A real stdio server whose text is hostile (``tests/fakes/stdio_hostile.py``): lone surrogates and terminal
escape sequences in results, log messages, tool errors, tool names and descriptions, and its stderr.

Through the CLI, end to end: the run exits 0 with every item called once; the journal and ``--output`` keep
the original text (as JSON escapes, read back exactly); stderr, ``show`` and ``logs`` hold no control
character; ``tools`` and ``call`` show the server's text escaped on stderr, and ``call`` keeps its result as
sent when stdout is piped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import ROOT, environment
from tests.fakes import fake_command

pytestmark = pytest.mark.integration

ODD = "odd\ud800 \x1b]0;pwned\x07title \x1b[2Jclear \x9b31mred\r\x08"  # as in stdio_hostile.ODD
CONTROL = [b"\x1b", b"\x9b", b"\xc2\x9b", b"\r", b"\x07", b"\x08"]  # the raw bytes that must not be shown


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``mcp-run ARGS`` with its output as bytes (so a control byte, or bytes that are not UTF-8, show)."""
    result = subprocess.run(
        [sys.executable, "-m", "runner", *args],
        env=environment(),
        capture_output=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
    result.stdout.decode("utf-8")  # valid UTF-8, both
    result.stderr.decode("utf-8")
    return result


def shown_safely(output: bytes) -> bool:
    return not any(control in output for control in CONTROL)


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    command = [*fake_command("stdio_hostile"), "--count-file", str(tmp_path / "count.txt")]
    path = tmp_path / "hostile.yaml"
    path.write_text(
        f"""
version: 1
servers:
  h: {{command: {json.dumps(command)}}}
steps:
  odd:
    server: h
    tool: odd
    for_each: ["a", "b", "c"]
    args: {{key: "${{{{ item }}}}"}}
  back:
    server: h
    tool: echo
    args: {{text: "${{{{ steps.odd.results[0].text }}}}"}}
outputs:
  odd: ${{{{ steps.odd.results[*].text }}}}
  back: ${{{{ steps.back.text }}}}
"""
    )
    return path


def test_a_run_on_a_hostile_server(workflow: Path, tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    out = tmp_path / "out.json"
    run = cli(tmp_path, str(workflow), "--state-dir", state, "--output", str(out), "--log-level", "debug")
    assert run.returncode == 0, run.stderr
    # every item ran once, and the text echoed back reached the server exactly
    ran = [line.split(" ", 1) for line in (tmp_path / "count.txt").read_text().splitlines()]
    calls = [(tool, json.loads(key)) for tool, key in ran]
    assert sorted(calls[:3]) == [("odd", "a"), ("odd", "b"), ("odd", "c")]
    assert calls[3:] == [("echo", f"a {ODD}")]
    # what a person sees: escaped
    assert shown_safely(run.stderr)
    assert b"log warning h (hostile\\x1b[2J): log a odd\\ud800 \\x1b]0;pwned\\x07title \\x1b[2Jclear" in run.stderr
    # what a program reads: the original text
    expected = {"odd": [f"{k} {ODD}" for k in "abc"], "back": f"a {ODD}"}
    assert json.loads(run.stdout) == expected
    assert json.loads(out.read_text(encoding="utf-8")) == expected
    journal = next((tmp_path / "state" / "runs").glob("*/journal.jsonl")).read_bytes()
    journal.decode("utf-8")
    events = [json.loads(line) for line in journal.splitlines()]
    texts = [e["result"]["content"][0]["text"] for e in events if e["type"] == "item_succeeded"]
    assert sorted(texts) == sorted([*expected["odd"], expected["back"]])
    assert b"\\ud800" in journal and b"\x1b" not in journal  # as JSON escapes

    summary = cli(tmp_path, str(workflow), "--state-dir", state, "--json", "--resume")  # a new run, as JSON
    assert summary.returncode == 0 and json.loads(summary.stdout)["status"] == "succeeded"
    for command in ("show", "logs"):
        shown = cli(tmp_path, command, "--state-dir", state, str(workflow))
        assert shown.returncode == 0, shown.stderr
        assert shown_safely(shown.stdout) and shown_safely(shown.stderr)
        assert b"log a odd\\ud800 \\x1b]0;pwned\\x07title" in shown.stdout
    as_json = cli(tmp_path, "show", "--json", "--state-dir", state, str(workflow))
    assert shown_safely(as_json.stdout)
    json.loads(as_json.stdout)


def test_tools_and_call_escape_what_the_server_says(tmp_path: Path) -> None:
    server = ["--", *fake_command("stdio_hostile")]
    tools = cli(tmp_path, "tools", *server)
    assert tools.returncode == 0, tools.stderr
    assert shown_safely(tools.stdout)
    assert b"esc\\x1b[2Jname -- t\\x1b[31m" in tools.stdout and b"odd \\x1b]0;tool title\\x07" in tools.stdout
    assert {t["name"] for t in json.loads(cli(tmp_path, "tools", "--json", *server).stdout)} >= {"esc\x1b[2Jname"}

    # stdout piped: the result as the server sent it (a lone surrogate cannot be encoded: escaped); stderr safe
    odd = cli(tmp_path, "call", "--tool", "odd", "--args", '{"key": "k"}', "--log-level", "debug", *server)
    assert odd.returncode == 0, odd.stderr
    assert odd.stdout == f"k {ODD}\n".replace("\ud800", "\\ud800").encode()
    assert shown_safely(odd.stderr) and b"log k odd\\ud800 \\x1b]0;pwned" in odd.stderr
    as_json = cli(tmp_path, "call", "--json", "--tool", "odd", "--args", '{"key": "k"}', *server)
    assert json.loads(as_json.stdout)["content"][0]["text"] == f"k {ODD}" and shown_safely(as_json.stdout)

    bad = cli(tmp_path, "call", "--tool", "bad", "--args", '{"key": "k"}', *server)
    assert bad.returncode == 1 and shown_safely(bad.stderr)
    crash = cli(tmp_path, "call", "--tool", "crash", *server)
    assert crash.returncode == 5 and shown_safely(crash.stderr)
    assert b"crash odd\\ud800 \\x1b]0;pwned\\x07title" in crash.stderr and b"second line odd" in crash.stderr


def test_a_crashed_servers_stderr_is_escaped_in_the_run_and_in_show(workflow: Path, tmp_path: Path) -> None:
    text = workflow.read_text().replace("tool: echo", "tool: crash")
    workflow.write_text(text)
    state = str(tmp_path / "state")
    run = cli(tmp_path, str(workflow), "--state-dir", state)
    assert run.returncode == 5, run.stderr  # the crash lost the call's answer: in doubt
    assert shown_safely(run.stderr) and b"crash odd\\ud800 \\x1b]0;pwned" in run.stderr
    shown = cli(tmp_path, "show", "--state-dir", state, str(workflow))
    assert shown_safely(shown.stdout) and b"crash odd\\ud800" in shown.stdout


def test_inputs_that_are_not_utf8_are_carried_too(tmp_path: Path) -> None:
    path = tmp_path / "echo.yaml"
    command = fake_command("stdio_hostile")
    path.write_text(
        f"""
version: 1
servers:
  h: {{command: {json.dumps(command)}}}
inputs:
  text: {{type: string}}
steps:
  echo: {{server: h, tool: echo, args: {{text: "${{{{ inputs.text }}}}"}}}}
outputs:
  echoed: ${{{{ steps.echo.text }}}}
"""
    )
    # a command-line argument that is not UTF-8 reaches Python as a lone surrogate (surrogateescape)
    argv = [sys.executable, "-m", "runner", str(path), "--state-dir", str(tmp_path / "state"), "--input"]
    result = subprocess.run(
        [os.fsencode(a) for a in argv] + [b"text=caf\xe9 \x1b[2J"],
        env=environment(),
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"echoed": "caf\udce9 \x1b[2J"}
    assert shown_safely(result.stderr)


def test_a_message_over_the_cap_names_the_cap_and_the_option(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    command = [*fake_command("mcp_modes"), "huge"]  # answers tools/call with a line of over 3 MiB
    path.write_text(
        f"""
version: 1
servers:
  h: {{command: {json.dumps(command)}}}
steps:
  big: {{server: h, tool: echo, args: {{text: hi}}}}
"""
    )
    state = str(tmp_path / "state")
    capped = cli(tmp_path, str(path), "--state-dir", state, "--no-journal", "--max-message-size", str(1 << 20))
    assert capped.returncode == 5  # the answer was lost: in doubt
    assert b"exceeded the 1,048,576-byte cap" in capped.stderr
    assert b"raise the limit with --max-message-size if this is expected" in capped.stderr
    raised = cli(tmp_path, str(path), "--state-dir", state, "--no-journal", "--max-message-size", str(4 << 20))
    assert raised.returncode == 0, raised.stderr
    assert cli(tmp_path, str(path), "--max-message-size", "0").returncode == 2
