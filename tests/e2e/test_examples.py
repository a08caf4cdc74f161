"""End to end: `mcp-run` as a subprocess on the example workflows, against the real demo server over stdio
and Streamable HTTP. Real processes, so the real clock, each bounded by a timeout."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from runner.schemas import JOURNAL_SCHEMA_PATH, SUMMARY_SCHEMA_PATH
from tests.e2e.support import ROOT, WORKFLOWS, mcp_run

pytestmark = pytest.mark.integration


def test_convert_docs_over_stdio(tmp_path: Path) -> None:
    out = tmp_path / "html"
    result = mcp_run(
        str(WORKFLOWS / "convert_docs.yaml"),
        "--state-dir",
        str(tmp_path / "state"),
        "--input",
        f"out={out}",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    sources = sorted(p.stem for p in (WORKFLOWS / "docs").glob("*.md"))
    assert summary["status"] == "succeeded" and summary["exit_code"] == 0
    assert summary["steps"]["convert"]["succeeded"] == len(sources)
    assert summary["outputs"]["pages"] == len(sources)
    assert sorted(p.stem for p in out.glob("*.html") if p.stem != "contents") == sources
    index = (out / "contents.html").read_text()
    assert all(f"{s}.html" in index for s in sources)
    html = (out / "quickstart.html").read_text()
    assert "<h1" in html and "<table" in (out / "configuration.html").read_text() + html
    assert "Traceback" not in result.stderr
    journal = next((tmp_path / "state" / "runs").glob("*/journal.jsonl"))
    assert oct(journal.stat().st_mode & 0o777) == "0o600"
    types = [json.loads(line)["type"] for line in journal.read_text().splitlines()]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert types.count("item_dispatched") == types.count("item_succeeded") == len(sources) + 2
    assert "progress" in types and "log" in types
    validator = jsonschema.Draft202012Validator(json.loads(JOURNAL_SCHEMA_PATH.read_text()))
    for raw in journal.read_text().splitlines():
        event = json.loads(raw)
        assert not list(validator.iter_errors(event)), event
    jsonschema.validate(summary, json.loads(SUMMARY_SCHEMA_PATH.read_text()))


@pytest.fixture
def http_demo() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.demo", "--transport", "http", "--port", "0", "--resumable"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = None
        for _ in range(50):  # bounded: the line comes once the server listens
            line = proc.stdout.readline()
            if not line:
                break
            match = re.search(r"listening on (http://\S+)", line)
            if match:
                url = match.group(1)
                break
        assert url, "the demo server did not report its URL"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_convert_docs_over_http_never_writes_the_token(tmp_path: Path, http_demo: str) -> None:
    out = tmp_path / "html"
    secret = "tok-" + "x7" * 10
    result = mcp_run(
        str(WORKFLOWS / "convert_docs_http.yaml"),
        "--state-dir",
        str(tmp_path / "state"),
        "--input",
        f"url={http_demo}",
        "--input",
        f"source={WORKFLOWS / 'docs'}",
        "--input",
        f"out={out}",
        "--log-level",
        "debug",
        env={"DEMO_TOKEN": secret},
    )
    assert result.returncode == 0, result.stderr
    assert (out / "contents.html").is_file()
    assert secret not in result.stdout + result.stderr
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace")


def test_invalid_workflow_is_exit_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nservers:\n  s: {command: [x]}\nsteps:\n  a: {server: s, tol: echo}\n")
    result = mcp_run(str(bad))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{bad}:5:" in result.stderr and "did you mean 'tool'" in result.stderr


def test_usage_errors_are_exit_2() -> None:
    assert mcp_run("run").returncode == 2
    assert mcp_run("call", "--tool").returncode == 2
    result = mcp_run("nonexistent.yaml")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_version_and_help() -> None:
    result = mcp_run("--version")
    assert result.returncode == 0 and result.stdout.startswith("mcp-run ")
    result = mcp_run("--help")
    assert "exit codes:" in result.stdout and "outcome unknown" in result.stdout


async def test_a_dropped_stream_is_resumed_and_journaled(tmp_path: Path) -> None:
    """A tool closes its SSE stream mid-call (SEP-1699): the run resumes it by GET, journals
    `stream_resumed`, gets the result, and the server ran the tool exactly once."""
    import trio

    from tests.integration.peers import sdk_http_server

    count = tmp_path / "count.txt"
    workflow = tmp_path / "wf.yaml"
    async with sdk_http_server("--resumable", "--retry-interval", "100", "--count-file", str(count)) as server:
        workflow.write_text(
            f"""
version: 1
servers:
  peer: {{url: "{server.url}", protocol: "2025-11-25"}}  # resumption is the 2025 wire's
steps:
  long: {{server: peer, tool: close_stream, args: {{steps: 6, delay: 0.1}}}}
outputs:
  text: ${{{{ steps.long.text }}}}
"""
        )
        result = await trio.to_thread.run_sync(
            lambda: mcp_run(str(workflow), "--state-dir", str(tmp_path / "state"), "--json")
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outputs"] == {"text": "closed-and-finished"}
    assert count.read_text().split() == ["close_stream"]
    journal = next((tmp_path / "state" / "runs").glob("*/journal.jsonl"))
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    resumed = [e for e in events if e["type"] == "stream_resumed"]
    assert resumed and resumed[0]["step"] == "long" and resumed[0]["last_event_id"]
    assert [e["type"] for e in events].count("item_dispatched") == 1
    progress = [e["progress"] for e in events if e["type"] == "progress"]
    assert progress == sorted(set(progress))  # each progress notification journaled once
