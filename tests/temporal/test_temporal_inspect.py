"""``runs``, ``show`` and ``logs`` with ``--engine temporal``: a run on Temporal reads as the same run made
locally does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.temporal.support import cli, dev_server, fan_out_workflow, in_process_worker, target_of

pytestmark = pytest.mark.slow


def _without_times(record: dict[str, object]) -> dict[str, object]:
    drop = {"run_id", "started", "finished", "duration_s", "pid", "pids", "workflow"}
    return {k: v for k, v in record.items() if k not in drop}


def test_runs_show_and_logs_read_a_temporal_run_as_a_local_one(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 3, mode="tool-error")
    state = ("--state-dir", str(tmp_path / "s"))
    code, _out, err = asyncio.run(cli(str(workflow), *state))
    assert code == 1, err
    code, local_show, err = asyncio.run(cli("show", str(workflow), *state, "--json"))
    assert code == 0, err
    code, local_logs, err = asyncio.run(cli("logs", str(workflow), *state))
    assert code == 0, err

    async def on_temporal() -> dict[str, tuple[int, str, str]]:
        async with dev_server() as env, in_process_worker(env, "insp"):
            where = ("--engine", "temporal", "--temporal-address", target_of(env))
            code, _out, err = await cli(str(workflow), *where, "--task-queue", "insp")
            assert code == 1, err
            run_id = err.split()[1]
            return {
                "run_id": (0, run_id, ""),
                "runs": await cli("runs", *where, "--json"),
                "runs_text": await cli("runs", *where),
                "show": await cli("show", run_id, *where, "--json"),
                "show_text": await cli("show", run_id, *where),
                "logs": await cli("logs", run_id, *where),
                "unknown": await cli("show", "20260101-000000-abcdef", *where),
            }

    got = asyncio.run(on_temporal())
    run_id = got["run_id"][1]
    for name in ("runs", "runs_text", "show", "show_text", "logs"):
        assert got[name][0] == 0, (name, got[name][2])

    runs = json.loads(got["runs"][1])["runs"]
    assert [r["run_id"] for r in runs] == [run_id]
    assert runs[0]["status"] == "failed" and runs[0]["exit_code"] == 1
    assert runs[0]["workflow"] == str(workflow.resolve())
    assert runs[0]["items"] == {"succeeded": 0, "failed": 3, "running": 0, "in_doubt": 0, "reused": 0, "reconciled": 0}
    assert run_id in got["runs_text"][1] and "failed" in got["runs_text"][1]

    remote = json.loads(got["show"][1])
    assert remote["run_id"] == run_id
    assert _without_times(remote) == _without_times(json.loads(local_show))
    assert f"run {run_id}: failed (exit 1)" in got["show_text"][1]
    assert "failures (3)" in got["show_text"][1]
    assert "--retry-failed" not in got["show_text"][1]  # not available on Temporal yet

    def shape(text: str) -> list[str]:  # the lines without their clock times
        return [line.split(" ", 1)[1] for line in text.splitlines()]

    assert shape(got["logs"][1]) == shape(local_logs)
    assert "run finished failed" in got["logs"][1]

    code, _out, err = got["unknown"]
    assert code == 2 and "no run 20260101-000000-abcdef on Temporal" in err, err


def test_show_exits_4_when_temporal_is_unreachable() -> None:
    for command in (("runs",), ("show", "x"), ("logs", "x")):
        code, _out, err = asyncio.run(cli(*command, "--engine", "temporal", "--temporal-address", "127.0.0.1:9"))
        assert code == 4, err
        assert "cannot reach Temporal at 127.0.0.1:9" in err and "Traceback" not in err
        assert "Fatal Python error" not in err  # the process leaves before the SDK's core can abort
    code, out, _err = asyncio.run(cli("runs", "--engine", "temporal", "--temporal-address", "127.0.0.1:9", "--json"))
    assert code == 4 and "cannot reach Temporal" in json.loads(out)["message"]


def test_logs_follow_prints_until_the_run_ends_and_show_says_running_meanwhile(tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # the calls wait for it
    workflow = fan_out_workflow(tmp_path, 2, mode="count", extra=f"--count-file {tmp_path / 'counts'} --gate {gate}")

    async def on_temporal() -> tuple[tuple[int, str, str], tuple[int, str, str], tuple[int, str, str]]:
        async with dev_server() as env, in_process_worker(env, "fol"):
            where = ("--engine", "temporal", "--temporal-address", target_of(env))
            code, _out, err = await cli(str(workflow), *where, "--task-queue", "fol", "--detach")
            assert code == 0, err
            run_id = err.split()[1]
            follow = asyncio.ensure_future(cli("logs", run_id, *where, "--follow"))
            show = await cli("show", run_id, *where, "--json")
            for _ in range(50):  # Temporal lists a run a moment after it starts
                runs = await cli("runs", *where, "--json")
                if runs[0] != 0 or json.loads(runs[1])["runs"]:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)  # real time: the run is on Temporal; --follow must still be waiting
            assert not follow.done()
            gate.touch()
            return show, runs, await asyncio.wait_for(follow, 60)

    show, runs, logs = asyncio.run(on_temporal())
    assert show[0] == 0 and json.loads(show[1])["status"] == "running", show
    listed = json.loads(runs[1])["runs"]
    assert runs[0] == 0 and listed[0]["status"] == "running" and listed[0]["items"] is None, runs
    assert logs[0] == 0, logs[2]
    lines = [line.split(" ", 1)[1] for line in logs[1].splitlines()]
    assert lines[0] == "run started" and lines[-1] == "run finished succeeded", lines
