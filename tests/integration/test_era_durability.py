"""Durability-first era choice (``protocol: auto``) against the official SDK server (mcp 2.3.0) over
Streamable HTTP, behind a proxy that cuts the connection of a call mid-stream: a call that is not safe to
repeat survives the cut where the server lets it. Real sockets on 127.0.0.1, the real clock, each test
bounded; the workflow runs through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from runner.exitcodes import ExitCode
from tests.integration.peers import sdk_http_server
from tests.integration.test_http_peers import CuttingProxy, _port

pytestmark = pytest.mark.integration


def _workflow(tmp: Path, url: str, protocol: str | None = None) -> Path:
    path = tmp / "flow.yaml"
    pin = f"\n    protocol: {json.dumps(protocol)}" if protocol is not None else ""
    path.write_text(
        f"""
version: 1
servers:
  sdk:
    url: {json.dumps(url)}{pin}
steps:
  work:
    server: sdk
    tool: work
    args: {{key: w1, steps: 6, delay: 0.2}}
outputs:
  text: ${{{{ steps.work.text }}}}
"""
    )
    return path


def _run(tmp: Path, *args: str, run: bool = True) -> subprocess.CompletedProcess[str]:
    options = ("--state-dir", str(tmp / "state"), "--no-progress") if run else ()
    return subprocess.run(
        [sys.executable, "-m", "runner", *args, *options],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp,
    )


async def _cut_run(
    tmp: Path, *server_args: str, protocol: str | None = None
) -> tuple[subprocess.CompletedProcess[str], CuttingProxy]:
    """Run the one-step workflow (under ``auto`` unless ``protocol``) through a proxy that cuts the call's
    stream after two progress notifications."""
    with trio.fail_after(150):
        async with sdk_http_server(*server_args) as server, trio.open_nursery() as nursery:
            proxy = CuttingProxy(_port(server.url), cut_after_progress=2)
            await nursery.start(proxy.serve)
            workflow = _workflow(tmp, f"http://127.0.0.1:{proxy.port}/mcp", protocol)
            output = tmp / "out.json"
            result = await trio.to_thread.run_sync(lambda: _run(tmp, "run", str(workflow), "--output", str(output)))
            nursery.cancel_scope.cancel()
    return result, proxy


async def test_auto_against_the_dual_era_sdk_server_resumes_a_cut_call_executed_once(tmp_path: Path) -> None:
    """The SDK server's ``server/discover`` names only 2026-07-28 and it offers no tasks, yet it accepts
    ``initialize``: ``work`` is not safe to repeat, so ``auto`` speaks 2025-11-25, whose stream resumes
    after the cut (GET with Last-Event-ID). Executed once, POSTed once, its result delivered."""
    count = tmp_path / "executions.txt"
    result, proxy = await _cut_run(tmp_path, "--resumable", "--retry-interval", "100", "--count-file", str(count))
    print(result.stdout + result.stderr)  # the report shows this run
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout + result.stderr
    assert "protocol 2025-11-25); era chosen because some calls are not safe to repeat" in lines
    assert "accepts initialize: its streams carry event ids" in lines  # its initialize answer was primed
    assert proxy.cuts == 1
    assert proxy.tools_call_posts == 1
    assert count.read_text().splitlines() == ["w1"]
    assert json.loads((tmp_path / "out.json").read_text()) == {"text": "worked w1"}


async def test_auto_against_a_modern_only_server_without_tasks_leaves_the_cut_in_doubt_and_says_why(
    tmp_path: Path,
) -> None:
    """A 2026-07-28-only server (the SDK's modern handler) without tasks refuses ``initialize``: the era stays
    2026-07-28, the connect line says a cut is in doubt, and the cut call is in doubt (exit 5), never re-sent."""
    count = tmp_path / "executions.txt"
    result, proxy = await _cut_run(tmp_path, "--modern-only", "--count-file", str(count))
    lines = result.stdout + result.stderr
    print(lines)  # the report shows this run
    assert result.returncode == ExitCode.OUTCOME_UNKNOWN, lines
    assert "protocol 2026-07-28); era chosen because" in lines and "refuses initialize" in lines
    assert "in doubt" in lines
    assert proxy.cuts == 1
    assert proxy.tools_call_posts == 1
    assert count.read_text().splitlines() == ["w1"]


async def test_a_pinned_2026_07_28_is_kept_and_its_cut_is_in_doubt(tmp_path: Path) -> None:
    """``protocol:`` still pins: the same server and cut at 2026-07-28 leave the call in doubt (what ``auto``
    did before durability decided), executed once, never re-sent."""
    count = tmp_path / "executions.txt"
    result, proxy = await _cut_run(
        tmp_path, "--resumable", "--retry-interval", "100", "--count-file", str(count), protocol="2026-07-28"
    )
    lines = result.stdout + result.stderr
    assert result.returncode == ExitCode.OUTCOME_UNKNOWN, lines
    assert "protocol 2026-07-28)" in lines and "era chosen" not in lines
    assert "2026-07-28 streams cannot be resumed" in lines
    assert proxy.tools_call_posts == 1
    assert count.read_text().splitlines() == ["w1"]


async def test_plan_check_says_which_era_auto_chooses_and_why(tmp_path: Path) -> None:
    with trio.fail_after(150):
        async with sdk_http_server() as server:
            workflow = _workflow(tmp_path, server.url)
            result = await trio.to_thread.run_sync(lambda: _run(tmp_path, "plan", "--check", str(workflow), run=False))
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stderr)  # the report shows this check
    assert "note: server sdk: protocol 2025-11-25, chosen because some calls are not safe to repeat" in result.stderr


async def test_auto_says_when_the_sdk_servers_streams_carry_no_event_id(tmp_path: Path) -> None:
    """Without an event store the SDK server's streams have no ids: 2025-11-25 is still chosen (no era does
    better), and the connect line says a cut may be in doubt."""
    with trio.fail_after(150):
        async with sdk_http_server() as server:
            workflow = _workflow(tmp_path, server.url)
            result = await trio.to_thread.run_sync(lambda: _run(tmp_path, "run", str(workflow)))
    lines = result.stdout + result.stderr
    assert result.returncode == 0, lines
    assert "protocol 2025-11-25); era chosen because" in lines and "carry no event id" in lines
