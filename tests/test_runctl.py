"""Run control: connection set-up retries, secrets, fingerprints."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from runner.connect import HttpTarget, StdioTarget, Target
from runner.engine.runctl import collect_secrets, fingerprints, make_opener
from runner.errors import ConnectFailed, HTTPStatusError
from runner.session import SessionOptions
from runner.workflow.loader import parse_workflow, validate

WORKFLOW = """
version: 1
servers:
  web:
    url: http://127.0.0.1:9/mcp
    headers: {Authorization: "Bearer ${{ env.TOKEN }}"}
  local: {command: [server]}
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
    assert isinstance(connect.targets[-1], StdioTarget)


def test_secrets_collected_from_env_headers_and_secret_inputs() -> None:
    p = plan()
    secrets = collect_secrets(p, {"pw": "hunter22", "n": 1}, {"TOKEN": "tok-123"})
    assert secrets == {
        "env.TOKEN": "tok-123",
        "inputs.pw": "hunter22",
        "servers.web.headers.Authorization": "Bearer tok-123",
    }


def test_fingerprints_flow_downstream_and_ignore_secrets() -> None:
    base = fingerprints(plan(), {"pw": "a", "n": 1})
    assert fingerprints(plan(), {"pw": "b", "n": 1}) == base  # secret inputs never enter a fingerprint
    edited = plan(WORKFLOW.replace('tool: t, args: {x: "${{ inputs.n }}"}', 'tool: t2, args: {x: "${{ inputs.n }}"}'))
    changed = fingerprints(edited, {"pw": "a", "n": 1})
    assert changed["a"] != base["a"]  # the edited step
    assert changed["b"] != base["b"]  # downstream of it
    assert changed["c"] == base["c"]  # independent of it
