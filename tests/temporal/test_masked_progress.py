"""A progress message holding a secret (an ``env`` value the workflow reads, echoed by the server) is masked
before it enters Temporal's history: in the progress signalled while the call runs, in the outcome the workflow
journals, and so in ``logs`` and ``export``. Masked before it is cut to its 200 characters: a secret across the
cut leaks no part of itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.masking import escape, shown
from runner.temporal.progress import MAX_MESSAGE
from tests.temporal.support import MODES, cli, dev_server, in_process_worker, target_of

pytestmark = pytest.mark.slow

SECRET = 'tok-"quoted"\\-' + "s" * 40  # 55 characters, with quotes and a backslash
PAD = "p" * (MAX_MESSAGE - len("half way: ") - 10)  # the secret begins 10 characters before the cut


def _workflow(folder: Path) -> Path:
    import sys

    command = json.dumps([sys.executable, str(MODES), "progress", "--echo-progress", "--delay", "3"])
    path = folder / "masked.yaml"
    path.write_text(
        f"""\
version: 1
name: masked
servers:
  modes: {{command: {command}}}
steps:
  call:
    server: modes
    tool: echo
    args: {{text: "{PAD}${{{{ env.MCP_RUN_TEST_TOKEN }}}}"}}
"""
    )
    return path


def test_a_secret_in_a_progress_message_never_enters_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_RUN_TEST_TOKEN", SECRET)  # the worker (in this process) and the run both see it
    workflow = _workflow(tmp_path)

    async def on_temporal() -> tuple[str, bytes, str, str]:
        async with dev_server() as env, in_process_worker(env, "masked"):
            where = ("--temporal-address", target_of(env))
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where, "--task-queue", "masked")
            assert code == 0, err
            run_id = err.split()[1]
            from runner.temporal.client import workflow_id

            history = await env.client.get_workflow_handle(workflow_id(run_id)).fetch_history()
            raw = b"".join(event.SerializeToString() for event in history.events)
            code, logs, logs_err = await cli("logs", run_id, "--engine", "temporal", *where)
            assert code == 0, logs_err
            code, journal, export_err = await cli("export", run_id, "--engine", "temporal", *where)
            assert code == 0, export_err
            return err, raw, logs, journal

    err, raw, logs, journal = asyncio.run(on_temporal())
    leaked = SECRET[:10]  # what the cut would have left of it
    for text, where in ((raw.decode(errors="replace"), "history"), (logs, "logs"), (journal, "export"), (err, "run")):
        assert leaked not in text, where
        assert json.dumps(SECRET)[1:11] not in text, where  # nor its JSON-escaped form
    progress = [json.loads(line) for line in journal.splitlines() if '"progress"' in line]
    messages = [e["message"] for e in progress if e.get("type") == "progress"]
    # Signalled while the call ran, then returned with its end: masked, then cut, then encoded for the journal
    # (the cut placeholder is text now: `***=`, shown as `***`; it never reads back as a value).
    masked = [f"{what}: {PAD}***env.MCP_RUN_TEST_TOKEN***"[:MAX_MESSAGE] for what in ("half way", "done")]
    assert messages == [escape(text) for text in masked]
    assert [shown(text) for text in messages] == masked
    assert "half way" in logs
