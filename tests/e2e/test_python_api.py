"""The Python API: runner.run_workflow runs a workflow as the CLI does and returns its outcome; refusals
raise typed errors; nothing is printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import runner
from runner.engine.core.resume import UnfinishedRun
from runner.engine.core.vocabulary import RunStatus, StepStatus

pytestmark = pytest.mark.integration

MODES = Path(__file__).resolve().parents[1] / "fakes" / "mcp_modes.py"


def workflow(tmp: Path, mode: str = "ok") -> Path:
    path = tmp / "wf.yaml"
    path.write_text(
        f"""
version: 1
servers:
  s: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(MODES))}, {mode}]}}
inputs:
  words: {{type: array, default: [a, b, c]}}
steps:
  echo:
    server: s
    tool: echo
    for_each: ${{{{ inputs.words }}}}
    key: ${{{{ item }}}}
    args: {{text: "${{{{ item }}}}"}}
outputs:
  echoed: ${{{{ steps.echo.results[*].text }}}}
"""
    )
    return path


def test_run_workflow_returns_the_outcome_and_prints_nothing(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    outcome = runner.run_workflow(workflow(tmp_path), inputs={"words": ["x", "y"]}, state_dir=tmp_path / "state")
    assert (outcome.status, int(outcome.exit_code)) == (RunStatus.SUCCEEDED, 0)
    assert outcome.outputs == {"echoed": ["x", "y"]}
    assert outcome.steps["echo"].status is StepStatus.SUCCEEDED and outcome.steps["echo"].counts()["succeeded"] == 2
    summary = outcome.summary()
    assert summary["run_id"] == outcome.run_id and summary["status"] == "succeeded"
    assert capfd.readouterr() == ("", "")


def test_a_failed_run_and_a_refusal(tmp_path: Path) -> None:
    path = workflow(tmp_path, "tool-error")
    outcome = runner.run_workflow(path, state_dir=tmp_path / "state")
    assert (outcome.status, int(outcome.exit_code)) == (RunStatus.FAILED, 1)
    assert [f["kind"] for f in outcome.failures] == ["tool-error"] * 3
    # retry_failed=True (the CLI's --retry-failed) reopens the closed failed run
    retried = runner.run_workflow(path, state_dir=tmp_path / "state", retry_failed=True)
    assert retried.run_id == outcome.run_id and retried.status is RunStatus.FAILED


def test_an_open_run_refuses_a_plain_run(tmp_path: Path) -> None:
    path = workflow(tmp_path, "silent")  # a server that never answers a call
    stuck = tmp_path / "stuck.yaml"
    stuck.write_text(path.read_text().replace("tool: echo", "tool: echo\n    idle_timeout: 1s"))
    first = runner.run_workflow(stuck, state_dir=tmp_path / "state")
    assert first.status is RunStatus.IN_DOUBT  # open until decided
    with pytest.raises(UnfinishedRun) as info:
        runner.run_workflow(stuck, state_dir=tmp_path / "state")
    assert info.value.run_id == first.run_id


def test_an_unknown_decision_about_items_in_doubt_is_refused(tmp_path: Path) -> None:
    with pytest.raises(runner.errors.UsageError, match="in_doubt must be 'ask', 'rerun', 'skip' or 'accept'"):
        runner.run_workflow(workflow(tmp_path), state_dir=tmp_path / "state", in_doubt="accpet")
    assert not (tmp_path / "state").exists()  # refused before anything
