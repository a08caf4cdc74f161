"""Resume rules end to end: recorded inputs, a changed workflow, secrets never written and re-expanded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import ROOT, counting_peer, environment, journal_events, run_and_kill_at, run_cli

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-" + "token-" * 4


def write_workflow(tmp: Path, *, tool_arg: str = "${{ item }}") -> Path:
    workflow = tmp / "wf.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
  peer:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(ROOT / "tests/peers/sdk_server.py"))}, stdio]
    max_concurrency: 2
inputs:
  items: {{type: array, default: [0, 1, 2]}}
  password: {{type: string, secret: true}}
steps:
  numbers:
    server: peer
    tool: echo
    args: {{text: "${{{{ to_string(inputs.items) }}}}"}}
  each:
    server: peer
    tool: slow
    for_each: "${{{{ steps.numbers.json }}}}"
    key: "{tool_arg}"
    args: {{steps: 2, delay: 0.05}}
  secret_echo:
    server: peer
    tool: echo
    needs: [each]
    args: {{text: "token=${{{{ env.MCP_RUN_TEST_TOKEN }}}} pw=${{{{ inputs.password }}}}"}}
outputs:
  echoed: ${{{{ steps.secret_echo.text }}}}
"""
    )
    return workflow


def mcp_run(tmp: Path, *args: str, token: str | None = SECRET) -> subprocess.CompletedProcess[str]:
    env = environment()
    if token is not None:
        env["MCP_RUN_TEST_TOKEN"] = token
    else:
        env.pop("MCP_RUN_TEST_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "runner", *args, "--state-dir", str(tmp / "state")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp,
    )


@pytest.mark.slow
def test_secrets_never_written_and_resume_uses_recorded_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workflow = write_workflow(tmp_path)
    items = "items=[0,1,2,3,4,5,6,7,8,9,10,11]"
    args = [sys.executable, "-m", "runner", str(workflow), "--state-dir", str(tmp_path / "state"),
            "--input", items, "--input", "password=hunter2-hunter2", "--quiet"]  # fmt: skip
    with monkeypatch.context() as patch:
        patch.setenv("MCP_RUN_TEST_TOKEN", SECRET)
        run_and_kill_at(tmp_path, args, 12)
    run_id = json.loads(next((tmp_path / "state" / "runs").glob("*/journal.jsonl")).read_text().splitlines()[0])[
        "run_id"
    ]
    # Resume by id, without --input: the 12 items come from the journal; the secret input must be given again.
    missing = mcp_run(tmp_path, "resume", run_id, "--json")
    assert missing.returncode == 2 and "password" in missing.stderr
    no_env = mcp_run(tmp_path, "resume", run_id, "--input", "password=hunter2-hunter2", "--json", token=None)
    assert no_env.returncode == 2 and "MCP_RUN_TEST_TOKEN" in no_env.stderr
    result = mcp_run(tmp_path, "resume", run_id, "--input", "password=hunter2-hunter2", "--json", "--rerun-in-doubt")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["steps"]["each"]["total"] == 12
    # the output held the secrets: masked on stdout too
    assert summary["outputs"]["echoed"] == "token=***env.MCP_RUN_TEST_TOKEN*** pw=***inputs.password***"
    for text in (result.stdout, result.stderr):
        assert SECRET not in text and "hunter2-hunter2" not in text
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            content = path.read_text(errors="replace")
            assert SECRET not in content and "hunter2-hunter2" not in content


@pytest.mark.slow
def test_changed_workflow_is_refused_unless_allowed(tmp_path: Path) -> None:
    workflow = write_workflow(tmp_path)
    args = [sys.executable, "-m", "runner", str(workflow), "--state-dir", str(tmp_path / "state"),
            "--input", "items=[0,1,2,3,4,5,6,7,8,9,10,11]", "--input", "password=pw-longer", "--quiet"]  # fmt: skip
    run_and_kill_at(tmp_path, args, 12)
    write_workflow(tmp_path, tool_arg="k-${{ item }}")  # the fan-out's key changed
    refused = mcp_run(tmp_path, str(workflow), "--resume", "--input", "password=pw-longer")
    assert refused.returncode == 2
    assert "changed" in refused.stderr and "each" in refused.stderr and "--allow-changed" in refused.stderr
    allowed = mcp_run(
        tmp_path,
        str(workflow),
        "--resume",
        "--allow-changed",
        "--rerun-in-doubt",
        "--json",
        "--input",
        "password=pw-longer",
    )
    assert allowed.returncode == 0, allowed.stderr
    summary = json.loads(allowed.stdout)
    assert summary["steps"]["numbers"]["reused"] == 1  # unchanged upstream step kept its result
    assert summary["steps"]["each"]["reused"] == 0  # the changed step ran afresh
    events = journal_events(tmp_path)
    assert [e["type"] for e in events].count("run_resumed") == 1


def test_env_values_in_inputs_and_json_like_secrets_survive_a_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An env value that reads as JSON (`false`) is masked without breaking the journal, and an input that
    contains a referenced env value is re-expanded on resume: the tool never sees a placeholder."""
    count = tmp_path / "count.txt"
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
{counting_peer(count, max_concurrency=2)}inputs:
  out: {{type: string}}
  items: {{type: array, default: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}}
steps:
  flags:
    server: peer
    tool: echo
    args: {{text: "flag=${{{{ env.MCP_RUN_TEST_FLAG }}}} site=${{{{ env.MCP_RUN_TEST_SITE }}}}"}}
  each:
    server: peer
    tool: count
    needs: [flags]
    for_each: ${{{{ inputs.items }}}}
    args: {{key: "${{{{ inputs.out }}}}/${{{{ item }}}}"}}
    idempotent: true
"""
    )
    site = str(tmp_path / "site")
    monkeypatch.setenv("MCP_RUN_TEST_FLAG", "false")
    monkeypatch.setenv("MCP_RUN_TEST_SITE", site)
    args = [sys.executable, "-m", "runner", str(workflow), "--state-dir", str(tmp_path / "state"),
            "--input", f"out={site}/out", "--quiet"]  # fmt: skip
    run_and_kill_at(tmp_path, args, 8)
    result = run_cli(tmp_path, str(workflow), "--state-dir", str(tmp_path / "state"), "--resume", "--json")
    assert result.returncode == 0, result.stderr
    keys = count.read_text().split()
    assert keys and all(k.startswith(f"{site}/out/") for k in keys), keys
    journal = next((tmp_path / "state" / "runs").glob("*/journal.jsonl")).read_text()
    assert site not in journal
    for line in journal.splitlines():
        json.loads(line)  # every line is still JSON
