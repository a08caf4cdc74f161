"""A side-effecting fan-out against a loopback Streamable HTTP server that admits 20 calls a second (burst 5) and
answers the rest 429 with ``Retry-After: 1`` before running anything (:mod:`tests.fakes.throttled_http`).

The one test here on the real clock: the pace itself is tested on the virtual one (tests/test_pace.py, with
the whole 300 items); this one checks the wire (429, Retry-After, the body) end to end with fewer items.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.support import run_cli, throttled_server

ITEMS = 60


@pytest.mark.slow  # about 7 s on the real clock: a second's pause, then the server's pace
def test_a_fanout_against_a_rate_limiter_runs_each_item_once_and_exits_0(tmp_path: Path) -> None:
    with throttled_server() as url:
        workflow = tmp_path / "fan.yaml"
        workflow.write_text(
            "version: 1\n"
            f"servers:\n  api:\n    url: {url}\n"
            "steps:\n  fan:\n    server: api\n    tool: write\n"
            f"    for_each: {json.dumps(list(range(ITEMS)))}\n"
            "    key: ${{ item }}\n"
            '    args: {key: "k${{ item }}"}\n'
        )
        started = time.monotonic()
        result = run_cli(tmp_path, str(workflow), "--no-progress", "--json", "--state-dir", str(tmp_path / "state"))
        took = time.monotonic() - started
        with urllib.request.urlopen(url.replace("/mcp", "/stats"), timeout=10) as answer:
            stats = json.load(answer)
    assert result.returncode == 0, result.stderr
    assert stats["executed"] == {f"k{i}": 1 for i in range(ITEMS)}  # every key exactly once
    summary = json.loads(result.stdout)
    refused = stats["throttled"]
    assert refused <= ITEMS // 5, (refused, result.stderr)
    if refused:
        assert summary["throttled"]["api"]["refused"] == refused
        assert "server api: throttled (429), pausing 1.0 s" in result.stderr
    assert took < 20, took
