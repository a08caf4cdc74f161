"""``mcp-run report --markdown`` and the summary ``mcp-run WORKFLOW`` appends to ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from runner.cli import main
from runner.report.markdown import markdown
from runner.report.model import build
from tests.report_run import RUN_ID, SETTLED, write_run
from tests.support import entries


def test_markdown_summary_of_a_run_with_failures_and_doubt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path)
    out = tmp_path / "summary.md"
    assert main(["report", RUN_ID, "--state-dir", str(tmp_path), "--markdown", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("### mcp-run report.yaml: in-doubt\n")
    assert "| convert | failed | 6 | 2 | 3 | 1 |" in text
    assert "- tool-error: disk full (convert f1, convert f4)" in text
    assert "| step | status | calls | succeeded | failed | in doubt | reused | reconciled | duration |" in text
    assert "cannot convert f2 &lt;b&gt;&amp;&lt;/b&gt;" not in text  # & is left as it is
    assert "cannot convert f2 &lt;b&gt;&&lt;/b&gt;" in text  # no HTML reaches the page
    assert "**In doubt** (1)" in text and "- convert `f3`" in text
    # The state dir as `where` writes it: relative to the current directory when that is shorter.
    decision = re.search(rf"mcp-run resume {re.escape(RUN_ID)} --state-dir (\S+) --skip-in-doubt", text)
    assert decision is not None and (Path.cwd() / decision.group(1)).resolve() == tmp_path.resolve()
    assert "| report | skipped: dependency 'convert' has calls in doubt |" in text
    capsys.readouterr()


def test_the_step_table_counts_the_reused_and_the_reconciled() -> None:
    text = markdown(build(entries(SETTLED)))
    assert "| convert | succeeded | 4 | 4 | 0 | 0 | 1 | 1 |" in text


def _workflow(tmp_path: Path) -> Path:
    flow = tmp_path / "flow.yaml"
    flow.write_text(
        f"""
version: 1
servers:
  demo: {{command: [{json.dumps(sys.executable)}, -m, runner.demo]}}
steps:
  hello: {{server: demo, tool: echo, args: {{text: hi}}}}
"""
    )
    return flow


@pytest.mark.integration
def test_a_run_appends_its_summary_to_github_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("MCP_RUN_STATE_DIR", raising=False)
    assert main([str(_workflow(tmp_path)), "--no-progress", "--quiet"]) == 0
    text = summary.read_text()
    assert text.startswith("earlier\n### mcp-run flow.yaml: succeeded\n")  # appended, never overwritten
    assert "| hello | succeeded | 1 | 1 | 0 | 0 |" in text
    capsys.readouterr()


@pytest.mark.integration
def test_a_summary_that_cannot_be_written_is_a_warning_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "missing" / "summary.md"))
    monkeypatch.delenv("MCP_RUN_STATE_DIR", raising=False)
    assert main([str(_workflow(tmp_path)), "--no-progress"]) == 0
    assert "warning: GITHUB_STEP_SUMMARY: cannot write" in capsys.readouterr().err


def test_no_summary_without_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.cli.reporting import append_step_summary

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = write_run(tmp_path)
    append_step_summary(run, tmp_path, lambda text: pytest.fail(text))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "s.md"))
    append_step_summary(run, tmp_path, lambda text: pytest.fail(text))
    assert "| convert | failed |" in (tmp_path / "s.md").read_text()
