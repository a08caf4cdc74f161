"""Run control: connection set-up retries, secrets, fingerprints."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from runner.connect import HttpTarget, StdioTarget, Target, render_target
from runner.engine.runctl import make_opener
from runner.errors import ConnectFailed, HTTPStatusError, WorkflowError
from runner.launch import LaunchError
from runner.secrets_of import collect_secrets
from runner.session import SessionOptions
from runner.workflow.fingerprints import fingerprints
from runner.workflow.loader import parse_workflow, validate
from runner.workflow.servers import check_headers

WORKFLOW = """
version: 1
servers:
  web:
    url: http://127.0.0.1:9/mcp
    headers: {Authorization: "Bearer ${{ env.TOKEN }}"}
  local: {command: [sh]}
inputs:
  pw: {type: string, secret: true, default: hunter22}
  n: {type: integer, default: 1}
steps:
  a: {server: web, tool: t, args: {x: "${{ inputs.n }}"}}
  b: {server: local, tool: t, args: {x: "${{ steps.a.text }}"}}
  c: {server: local, tool: t, args: {x: 1}}
"""


def plan(text: str = WORKFLOW, **inputs: Any) -> Any:
    return validate(parse_workflow(text), input_pairs=[f"{k}={v}" for k, v in inputs.items()])


class FakeConnect:
    def __init__(self, failures: list[int]) -> None:
        self.failures = list(failures)  # HTTP statuses for the next attempts
        self.times: list[float] = []
        self.targets: list[Target] = []

    @asynccontextmanager
    async def __call__(self, target: Target, options: SessionOptions) -> AsyncIterator[Any]:
        self.times.append(trio.current_time())
        self.targets.append(target)
        if self.failures:
            status = self.failures.pop(0)
            error = HTTPStatusError(f"server answered {status}", status_code=status)
            raise ConnectFailed(f"could not initialize: {error}") from error
        yield "session"


async def test_the_opener_renders_the_target_and_opens_once(autojump_clock: trio.abc.Clock) -> None:
    # Whether to try again is the server link's decision (tests/test_supervisor.py), not the opener's.
    connect = FakeConnect([503])
    opener = make_opener(plan(), {"n": 1}, {"TOKEN": "abc"}, connect=connect)
    with pytest.raises(ConnectFailed, match="503") as info:
        async with opener("web", SessionOptions()):
            pass
    assert info.value.retryable is False  # FakeConnect builds a plain ConnectFailed
    async with opener("web", SessionOptions()) as session:
        assert session == "session"
    assert len(connect.times) == 2
    target = connect.targets[0]
    assert isinstance(target, HttpTarget) and target.headers == {"Authorization": "Bearer abc"}
    assert "abc" not in repr(target)
    async with opener("local", SessionOptions()):
        pass
    local = connect.targets[-1]
    assert isinstance(local, StdioTarget)
    assert local.command == [shutil.which("sh")] and local.cwd == os.getcwd()  # no file: the current directory


def test_secrets_collected_from_env_headers_and_secret_inputs() -> None:
    p = plan()
    secrets = collect_secrets(p, {"pw": "hunter22", "n": 1}, {"TOKEN": "tok-123"})
    assert secrets == {
        "env.TOKEN": "tok-123",
        "inputs.pw": "hunter22",
        "servers.web.headers.Authorization": "Bearer tok-123",
    }


def test_a_header_rendered_to_text_http_cannot_carry_is_refused_naming_server_and_header() -> None:
    p = validate(parse_workflow(WORKFLOW, file="w.yaml"), input_pairs=["pw=x"])
    expected = (
        "w.yaml:6:30: servers.web.headers.Authorization: server web: the value of header 'Authorization' holds "
        "U+00E9 at character 12, which is not ASCII (as rendered from its template)\n"
        "  hint: HTTP header values are ASCII: percent-encode or base64 the text as the server expects it, or send "
        "it in the tool's arguments instead"
    )
    with pytest.raises(WorkflowError) as info:
        check_headers(p, {"pw": "x", "n": 1}, {"TOKEN": "tok-\u00e9-secret"})
    assert str(info.value) == expected  # and not the value: it may be a secret
    with pytest.raises(WorkflowError):  # also when the server's target is made (a session opened later)
        render_target(p, "web", {"pw": "x", "n": 1}, {"TOKEN": "tok-\u00e9-secret"})
    check_headers(p, {"pw": "x", "n": 1}, {"TOKEN": "tok-123"})  # ASCII: fine


def test_fingerprints_flow_downstream_and_ignore_secrets() -> None:
    base = fingerprints(plan(), {"pw": "a", "n": 1})
    assert fingerprints(plan(), {"pw": "b", "n": 1}) == base  # secret inputs never enter a fingerprint
    edited = plan(WORKFLOW.replace('tool: t, args: {x: "${{ inputs.n }}"}', 'tool: t2, args: {x: "${{ inputs.n }}"}'))
    changed = fingerprints(edited, {"pw": "a", "n": 1})
    assert changed["a"] != base["a"]  # the edited step
    assert changed["b"] != base["b"]  # downstream of it
    assert changed["c"] == base["c"]  # independent of it


# ---------------------------------------------------------------------------------------------------
# Stdio servers: where they start and what they get (the rules themselves: tests/test_launch.py)

SERVERS = """
version: 1
servers:
  local:
    command: [./bin/server.sh, --flag]
    env_passthrough: [MCP_RUN_T_TOKEN, "MCP_RUN_T_NPM_*", MCP_RUN_T_UNSET]
    env: {MCP_RUN_T_NPM_B: from-env, FIXED: "${{ inputs.n }}"}
  moved: {command: [./bin/server.sh], cwd: data}
  lost: {command: [./bin/nope.sh]}
inputs:
  n: {type: integer, default: 1}
steps:
  a: {server: local, tool: t}
  b: {server: moved, tool: t}
  c: {server: lost, tool: t}
"""


@pytest.fixture
def flows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workflow in ``<tmp>/flows`` with its server in ``bin/``; the test runs from ``<tmp>/elsewhere``."""
    folder = tmp_path / "flows"
    (folder / "bin").mkdir(parents=True)
    (folder / "data").mkdir()
    (folder / "bin" / "server.sh").write_text("#!/bin/sh\n")
    (folder / "bin" / "server.sh").chmod(0o755)
    (folder / "w.yaml").write_text(SERVERS)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    for name, value in {"MCP_RUN_T_TOKEN": "tok-9f8e7d", "MCP_RUN_T_NPM_A": "a-value", "MCP_RUN_T_NPM_B": "b-value",
                        "MCP_RUN_T_OTHER": "not-passed"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    return folder


def test_a_stdio_target_starts_in_the_workflows_folder_with_its_program_resolved_there(flows: Path) -> None:
    p = validate(os.path.relpath(flows / "w.yaml"))
    target = render_target(p, "local", {"n": 1}, {})
    assert isinstance(target, StdioTarget)
    assert target.command == [str(flows / "bin" / "server.sh"), "--flag"] and target.cwd == str(flows)
    moved = render_target(p, "moved", {"n": 1}, {})
    assert isinstance(moved, StdioTarget) and moved.cwd == str(flows / "data")
    assert moved.command == [str(flows / "bin" / "server.sh")]


def test_a_run_begun_in_journal_format_1_starts_its_servers_as_that_version_did(flows: Path) -> None:
    """Its first calls ran in the caller's directory: the rest of the run must read and write there too."""
    p = validate(os.path.relpath(flows / "w.yaml"))
    local = render_target(p, "local", {"n": 1}, {}, legacy=True)
    assert isinstance(local, StdioTarget)
    assert local.command == ["./bin/server.sh", "--flag"] and local.cwd is None  # as given, from where we are
    moved = render_target(p, "moved", {"n": 1}, {}, legacy=True)
    assert isinstance(moved, StdioTarget) and moved.cwd == str(flows / "data")  # an explicit cwd: as before


def test_a_stdio_target_gets_what_env_passthrough_names_and_env_wins(flows: Path) -> None:
    target = render_target(validate(str(flows / "w.yaml")), "local", {"n": 7}, {})
    assert isinstance(target, StdioTarget)
    assert dict(target.env) == {
        "MCP_RUN_T_TOKEN": "tok-9f8e7d",
        "MCP_RUN_T_NPM_A": "a-value",
        "MCP_RUN_T_NPM_B": "from-env",  # env wins over a variable passed through
        "FIXED": "7",
    }  # MCP_RUN_T_UNSET is absent, MCP_RUN_T_OTHER was not asked for
    assert "tok-9f8e7d" not in repr(target) and "MCP_RUN_T_TOKEN" in repr(target)


def test_a_server_that_cannot_start_is_named_with_its_path_and_line(flows: Path) -> None:
    file = os.path.relpath(flows / "w.yaml")
    with pytest.raises(LaunchError) as info:
        render_target(validate(file), "lost", {"n": 1}, {})
    assert str(info.value) == (
        f"cannot start server lost: command ./bin/nope.sh not found: {flows / 'bin' / 'nope.sh'} ({file}:9:20)"
    )


def test_values_passed_through_are_secrets(flows: Path) -> None:
    secrets = collect_secrets(validate(str(flows / "w.yaml")), {"n": 1}, {})
    assert secrets == {"env.MCP_RUN_T_TOKEN": "tok-9f8e7d", "env.MCP_RUN_T_NPM_A": "a-value",
                       "env.MCP_RUN_T_NPM_B": "b-value"}  # fmt: skip


def test_fingerprints_do_not_change_for_a_server_without_env_passthrough() -> None:
    # Runs started before env_passthrough existed resume without "the workflow changed": these are the
    # fingerprints mcp-run computed for this workflow before the field was added.
    before = WORKFLOW.replace("local: {command: [sh]}", "local: {command: [server]}")
    pinned = {"a": "3c10a634c65fb582", "b": "a2faf7c625a46f31", "c": "73bbc7398bc32820"}
    assert fingerprints(plan(before), {"pw": "a", "n": 1}) == pinned
    # Setting it changes what the server gets: its steps' fingerprints change, the others' do not.
    after = before.replace("local: {command: [server]}", "local: {command: [server], env_passthrough: [X]}")
    changed = fingerprints(plan(after), {"pw": "a", "n": 1})
    assert changed["a"] == pinned["a"] and changed["b"] != pinned["b"] and changed["c"] != pinned["c"]


def test_pinning_a_protocol_revision_leaves_the_fingerprints_as_they_were() -> None:
    # The revision spoken changes how a call travels, not what it does: a resume is not "the workflow changed".
    before = WORKFLOW.replace("local: {command: [sh]}", "local: {command: [server]}")
    pinned = before.replace("local: {command: [server]}", "local: {command: [server], protocol: '2025-11-25'}")
    assert pinned != before
    assert fingerprints(plan(pinned), {"pw": "a", "n": 1}) == fingerprints(plan(before), {"pw": "a", "n": 1})
