"""The real-server matrix: one small workflow (a call, a fan-out with progress, a fan-out of echoes) run by
mcp-run against real servers in every protocol era and transport they offer.

- the official SDK server (mcp 2.3.0, tests/peers/sdk_server.py): stateful Streamable HTTP (SSE answers),
  JSON answers, stateless (``stateless_http=True``), modern-only (every request to the SDK's 2026-07-28
  handler, tests/peers/sdk_eras.py) and the deprecated HTTP+SSE transport (``app.run("sse")``);
- server-everything over stdio and Streamable HTTP, and its ``simulate-research-query`` (a tool that
  requires tasks).

Every case must pass (a case that cannot pass would be marked ``xfail(strict=True)`` with its reason).
Real processes and sockets, so the real clock; every case is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

import runner
from runner.engine.core.vocabulary import RunStatus
from tests.integration.peers import (
    ROOT,
    RunningServer,
    everything_command,
    everything_http_server,
    missing_peer,
    sdk_http_server,
    serve_http,
)

pytestmark = pytest.mark.integration

SDK_ERAS = ROOT / "tests" / "peers" / "sdk_eras.py"
ERA_RE = re.compile(r"^MCP-RUN-ERA listening on (http://\S+)$")
RUN_TIMEOUT = 120.0


def _era_url(line: str) -> str | None:
    match = ERA_RE.match(line)
    return match.group(1) if match else None


@asynccontextmanager
async def sdk_era_server(mode: str) -> AsyncIterator[RunningServer]:
    """The SDK test peer in ``mode`` (stateless, modern-only, sse; see tests/peers/sdk_eras.py)."""
    async with serve_http([sys.executable, str(SDK_ERAS), mode, "--port", "0"], _era_url) as server:
        yield server


@asynccontextmanager
async def no_server() -> AsyncIterator[None]:
    yield None


@dataclass(frozen=True)
class Peer:
    """How to reach one server of the matrix (``start`` yields the running HTTP server, or None for stdio) and
    the tools its workflow uses."""

    start: Callable[[], AbstractAsyncContextManager[RunningServer | None]]
    family: str  # "sdk" or "everything": which tool names the workflow uses
    stdio: list[str] | None = None
    progress: bool = True  # False: the server answers with plain JSON, which carries no notifications


def _sdk(*extra: str) -> Peer:
    return Peer(lambda: sdk_http_server(*extra), "sdk", progress="--json-response" not in extra)


def _sdk_era(mode: str) -> Peer:
    return Peer(lambda: sdk_era_server(mode), "sdk")


def _everything_stdio() -> Peer:
    return Peer(no_server, "everything", stdio=everything_command("stdio"))


MATRIX: dict[str, tuple[Callable[[], Peer], str | None]] = {
    "sdk-stateful": (_sdk, None),
    "sdk-json": (lambda: _sdk("--json-response"), None),
    "sdk-stateless": (lambda: _sdk_era("stateless"), None),
    "sdk-modern-only": (lambda: _sdk_era("modern-only"), None),
    "sdk-legacy-sse": (lambda: _sdk_era("sse"), None),
    "everything-stdio": (_everything_stdio, None),
    "everything-http": (lambda: Peer(everything_http_server, "everything"), None),
}


def _cases() -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=reason) if reason else (), id=name)
        for name, (_, reason) in MATRIX.items()
    ]


# The workflow, per family of tool names: one call, a fan-out reporting progress, a fan-out of echoes.
STEPS = {
    "sdk": """
  sum:
    server: s
    tool: add
    args: {a: 2, b: 40}
  work:
    server: s
    tool: slow
    for_each: [1, 2, 3]
    key: ${{ item }}
    args: {steps: 3, delay: 0.01}
  echo:
    server: s
    tool: echo
    for_each: ${{ inputs.words }}
    key: ${{ item }}
    args: {text: "${{ item }}"}
outputs:
  sum: ${{ steps.sum.text }}
  work: ${{ steps.work.results[*].text }}
  echoed: ${{ steps.echo.results[*].text }}
""",
    "everything": """
  sum:
    server: s
    tool: get-sum
    args: {a: 2, b: 40}
  work:
    server: s
    tool: trigger-long-running-operation
    for_each: [1, 2, 3]
    key: ${{ item }}
    args: {duration: 0.3, steps: 3}
  echo:
    server: s
    tool: echo
    for_each: ${{ inputs.words }}
    key: ${{ item }}
    args: {message: "${{ item }}"}
outputs:
  sum: ${{ steps.sum.text }}
  work: ${{ steps.work.results[*].text }}
  echoed: ${{ steps.echo.results[*].text }}
""",
}

RESEARCH = """
  research:
    server: s
    tool: simulate-research-query
    args: {topic: mcp-run, ambiguous: false}
outputs:
  report: ${{ steps.research.text }}
"""


def _workflow(tmp: Path, peer: Peer, server: RunningServer | None, steps: str) -> Path:
    if peer.stdio is not None:
        spec = f"command: {json.dumps(peer.stdio)}"
    else:
        assert server is not None
        spec = f"url: {json.dumps(server.url)}"
    path = tmp / "matrix.yaml"
    path.write_text(
        f"""
version: 1
servers:
  s: {{{spec}, max_concurrency: 4}}
inputs:
  words: {{type: array, default: [alpha, beta, gamma, delta]}}
steps:{steps}""",
        encoding="utf-8",
    )
    return path


def _journal(state: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for journal in (state / "runs").glob("*/journal.jsonl"):
        lines += [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines


async def _run(tmp: Path, name: str, steps: str | None = None) -> tuple[runner.Outcome, list[dict[str, Any]], Peer]:
    peer = MATRIX[name][0]()
    if peer.family == "everything" and everything_command("stdio") is None:
        missing_peer("server-everything is not installed: run scripts/setup.sh")
    with trio.fail_after(RUN_TIMEOUT):
        async with peer.start() as server:
            path = _workflow(tmp, peer, server, steps or STEPS[peer.family])
            outcome = await runner.arun_workflow(path, state_dir=tmp / "state")
    return outcome, _journal(tmp / "state"), peer


@pytest.mark.parametrize("name", _cases())
async def test_a_small_workflow_runs_against_each_real_server(name: str, tmp_path: Path) -> None:
    outcome, journal, peer = await _run(tmp_path, name)
    assert outcome.failures == [] and outcome.status is RunStatus.SUCCEEDED, [f["error"] for f in outcome.failures]
    assert "42" in outcome.outputs["sum"]
    expected_work = "done 3" if peer.family == "sdk" else "Long running operation completed"
    assert len(outcome.outputs["work"]) == 3 and all(expected_work in text for text in outcome.outputs["work"])
    echoed = outcome.outputs["echoed"]
    assert [w for w in ("alpha", "beta", "gamma", "delta") if any(w in text for text in echoed)] == [
        "alpha",
        "beta",
        "gamma",
        "delta",
    ]
    progress = [e for e in journal if e.get("type") == "progress" and e.get("step") == "work"]
    if peer.progress:
        assert {e["item"] for e in progress} == {"1", "2", "3"}, "every item of the fan-out reported progress"
    else:
        assert progress == []


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, id=n) for n in ("everything-stdio", "everything-http")],
)
async def test_simulate_research_query_completes_through_a_task(name: str, tmp_path: Path) -> None:
    outcome, _, _ = await _run(tmp_path, name, RESEARCH)
    assert outcome.status is RunStatus.SUCCEEDED, [f["error"] for f in outcome.failures]
    assert "Research Report: mcp-run" in outcome.outputs["report"]
