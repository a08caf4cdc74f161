"""Server log messages on Temporal: ``--server-log-level`` travels in the run's definition; the worker asks it
of the server and writes the messages at or above it to its stderr, masked. No Temporal server."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import runner.temporal.client as client_module
from runner.cli import main
from runner.errors import UsageError
from runner.masking import Masker
from runner.protocol.mcp import LogMessage
from runner.temporal.serverlog import log_handlers
from runner.temporal.spec import RunSpec
from tests.temporal.support import fan_out_workflow, open_scripted_session


def test_log_messages_at_or_above_the_level_are_written_masked() -> None:
    out = io.StringIO()
    on_log, on_warning = log_handlers("modes", "warning", Masker({"API_KEY": "s3cret-value-9876"}), out)
    on_log(LogMessage(level="info", data="quiet"), None)
    on_log(LogMessage(level="error", data={"token": "s3cret-value-9876"}, logger="db"), None)
    on_log(LogMessage(level="warning", data="key s3cret-value-9876 used"), 3)
    on_warning("stray reply s3cret-value-9876")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert "quiet" not in out.getvalue()
    assert "s3cret-value-9876" not in out.getvalue()
    assert lines[0].startswith("mcp-run worker: [modes] [error db] {")
    assert "[modes] [warning] key" in lines[1]
    assert lines[2].startswith("mcp-run worker: warning: [modes] stray reply")


def test_no_level_shows_every_message() -> None:
    out = io.StringIO()
    on_log, _ = log_handlers("s", None, Masker(), out)
    on_log(LogMessage(level="debug", data="fine detail"), None)
    assert "[s] [debug] fine detail" in out.getvalue()


async def test_the_worker_asks_the_runs_level_and_logs_through_its_handlers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fan_out_workflow(tmp_path, 1)
    spec = RunSpec(run_id="r", workflow=str(path), text=path.read_text(), server_log_level="error")
    options, _, _ = await open_scripted_session(monkeypatch, spec, "modes")
    assert options.server_log_level == "error"
    assert options.on_log is not None and options.on_warning is not None
    options.on_log(LogMessage(level="warning", data="below"), None)
    options.on_log(LogMessage(level="critical", data="disk full"), None)
    err = capsys.readouterr().err
    assert "below" not in err
    assert "[modes] [critical] disk full" in err


def test_run_on_temporal_carries_the_server_log_level_in_the_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fan_out_workflow(tmp_path, 1)
    started: list[RunSpec] = []

    async def connect(address: str) -> object:
        return object()

    async def start_run(client: object, spec: RunSpec, task_queue: str) -> object:
        started.append(spec)
        raise UsageError("stopped here by the test")

    monkeypatch.setattr(client_module, "connect", connect)
    monkeypatch.setattr(client_module, "start_run", start_run)
    assert main([str(path), "--engine", "temporal", "--server-log-level", "debug"]) == 2
    [spec] = started
    assert spec.server_log_level == "debug"
    assert RunSpec.from_json(spec.to_json()).server_log_level == "debug"
