"""The worker opens each server's session as the local scheduler does: the server's ``protocol:``, its answers
to elicitation and roots requests, OAuth tokens masked; and ``run --engine temporal`` refuses the flags the
worker cannot honour. No Temporal server: the opener is a scripted stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli import main
from runner.engine.calls.servers import answer_policy
from runner.temporal.spec import RunSpec, build_plan_of
from tests.temporal.support import fan_out_workflow, open_scripted_session


def _workflow(tmp_path: Path) -> Path:
    path = fan_out_workflow(tmp_path, 1)
    text = path.read_text().replace(
        "    max_concurrency: 8\n",
        "    max_concurrency: 8\n    protocol: '2025-11-25'\n    elicitation: defaults\n    roots: ['.']\n",
    )
    path.write_text(text)
    return path


async def test_the_worker_opens_sessions_with_the_servers_settings_and_masks_oauth_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _workflow(tmp_path)
    spec = RunSpec(run_id="r", workflow=str(path), text=path.read_text())
    options, made_with, sessions = await open_scripted_session(monkeypatch, spec, "modes")
    assert options.protocol == "2025-11-25"
    assert options.answers == answer_policy(build_plan_of(spec), "modes")
    assert options.answers.elicitation.value == "defaults" and len(options.answers.roots) == 1
    assert options.tasks_extension is False
    sink = made_with.get("on_secret")
    assert sink is not None
    sink("oauth-token-1234567890")
    assert "oauth-token-1234567890" not in sessions.masker(spec).mask("Bearer oauth-token-1234567890")


@pytest.mark.parametrize("flag", [["--protocol-version", "2025-11-25"], ["--elicitation", "defaults"]])
def test_run_on_temporal_refuses_the_flags_the_worker_does_not_honour(
    tmp_path: Path, flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = fan_out_workflow(tmp_path, 1)
    code = main([str(path), "--engine", "temporal", *flag])
    assert code == 2
    assert f"{flag[0]} is not available with --engine temporal" in capsys.readouterr().err
