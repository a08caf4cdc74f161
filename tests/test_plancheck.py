"""``mcp-run plan --check`` in process, against fake servers over real pipes: one exit code per outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main
from tests.fakes import fake_command

DIES = ["sh", "-c", "echo 'fatal: no config' >&2; exit 3"]


def workflow(tmp_path: Path, servers: dict[str, list[str]], steps: dict[str, tuple[str, str]]) -> str:
    lines = ["version: 1", "servers:"]
    lines += [f"  {name}: {{command: {json.dumps(command)}}}" for name, command in servers.items()]
    lines += ["steps:"]
    lines += [
        f"  {sid}: {{server: {server}, tool: {tool}, args: {{text: hi}}}}" for sid, (server, tool) in steps.items()
    ]
    path = tmp_path / "flow.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def check(path: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["plan", "--check", path])
    return code, capsys.readouterr().err.splitlines()


def test_a_server_that_cannot_start_is_unreachable_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workflow(tmp_path, {"dead": DIES}, {"a": ("dead", "echo")})
    assert check(path, capsys) == (
        4,
        [
            "mcp-run: error: cannot check the plan: server dead: could not initialize: server exited with code 3",
            "  server stderr (last lines):",
            "    fatal: no config",
        ],
    )


def test_findings_on_the_servers_that_answered_come_with_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = {"dead": DIES, "modes": fake_command("mcp_modes", "ok")}
    path = workflow(tmp_path, servers, {"a": ("dead", "echo"), "b": ("modes", "echo")})
    code, lines = check(path, capsys)
    assert code == 4
    assert lines == [
        "mcp-run: error: cannot check the plan: server dead: could not initialize: server exited with code 3",
        "  server stderr (last lines):",
        "    fatal: no config",
        "note: step b: echo is annotated destructive",
    ]


def test_errors_in_the_plan_itself_win_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = {"dead": DIES, "modes": fake_command("mcp_modes", "ok")}
    path = workflow(tmp_path, servers, {"a": ("dead", "echo"), "b": ("modes", "ecoh")})
    code, lines = check(path, capsys)
    assert code == 2
    assert lines == [
        "error: server dead: could not initialize: server exited with code 3",
        "  server stderr (last lines):",
        "    fatal: no config",
        "error: step b: server modes has no tool 'ecoh'; did you mean 'echo'?",
    ]


def test_a_server_that_breaks_the_protocol_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workflow(tmp_path, {"old": fake_command("mcp_modes", "bad-version")}, {"a": ("old", "echo")})
    code, lines = check(path, capsys)
    assert code == 3
    assert lines[0].startswith("mcp-run: error: cannot check the plan: server old: server chose protocol version")


def test_every_server_reached_and_nothing_wrong_is_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workflow(tmp_path, {"modes": fake_command("mcp_modes", "ok")}, {"a": ("modes", "echo")})
    assert check(path, capsys) == (
        0,
        ["note: step a: echo is annotated destructive", "ok: 1 step checked against 1 server"],  # by default
    )
