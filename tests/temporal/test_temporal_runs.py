"""The same workflow file on Temporal and on the local engine: the same outputs, statuses and exit codes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.temporal.dag import WORKFLOW_NAME
from runner.temporal.fanout import CHILD_WORKFLOW
from runner.temporal.spec import CHILD_ITEMS_VARIABLE
from tests.temporal.support import (
    MODES,
    ROOT,
    cli,
    dev_server,
    fan_out_workflow,
    in_process_worker,
    summary_of,
    target_of,
)

pytestmark = pytest.mark.slow


def _local(*args: str) -> tuple[int, str, str]:
    return asyncio.run(cli(*args))


def test_the_example_workflow_gives_the_same_outputs(tmp_path: Path) -> None:
    for name in ("local", "temporal"):
        shutil.copytree(ROOT / "workflows", tmp_path / name)
    code, out, err = _local(str(tmp_path / "local/convert_docs.yaml"), "--json", "--state-dir", str(tmp_path / "s"))
    assert code == 0, err
    local = summary_of(out)

    async def on_temporal() -> tuple[int, str, str]:
        async with dev_server() as env, in_process_worker(env, "ex"):
            path = str(tmp_path / "temporal/convert_docs.yaml")
            return await cli(
                path, "--engine", "temporal", "--temporal-address", target_of(env), "--task-queue", "ex", "--json"
            )

    code, out, err = asyncio.run(on_temporal())
    assert code == 0, err
    remote = summary_of(out)
    assert remote["status"] == local["status"] == "succeeded"
    assert local["outputs"]["pages"] == remote["outputs"]["pages"] == 13
    assert Path(remote["outputs"]["index"]).name == Path(local["outputs"]["index"]).name
    assert (tmp_path / "temporal/build/html/contents.html").read_text().count("<li") == 13
    assert [s["status"] for s in remote["steps"].values()] == [s["status"] for s in local["steps"].values()]


@pytest.mark.parametrize("child_items", [None, 60], ids=["in-the-run", "child-workflows"])
def test_a_200_item_fan_out_gives_the_same_outputs(tmp_path: Path, child_items: int | None) -> None:
    """In the run's workflow, and (above a test-sized threshold) as child workflows of at most 60 calls each,
    given their slice by reference (the run's definition and the indices), not as a list of calls."""
    workflow = fan_out_workflow(tmp_path, 200)
    code, out, err = _local(str(workflow), "--json", "--state-dir", str(tmp_path / "s"))
    assert code == 0, err
    local = summary_of(out)
    children: list[tuple[str, dict[str, object]]] = []

    async def on_temporal() -> tuple[int, str, str]:
        async with dev_server() as env, in_process_worker(env, "fan"):
            where = ("--temporal-address", target_of(env), "--task-queue", "fan")
            knob = {CHILD_ITEMS_VARIABLE: str(child_items)} if child_items else None
            done = await cli(str(workflow), "--engine", "temporal", *where, "--json", "--batch-size", "50", env=knob)
            children.extend(await _children_of(env.client, expected=4 if child_items else 0))
            if not child_items:  # the run's own activities get slices too
                async for w in env.client.list_workflows(f'WorkflowType="{WORKFLOW_NAME}"'):
                    requests = await _activity_requests(env.client, w.id, w.run_id)
                    assert len(requests) == 4 and all("slice" in r and "items" not in r for r in requests), requests
            return done

    code, out, err = asyncio.run(on_temporal())
    assert code == 0, err
    remote = summary_of(out)
    assert remote["outputs"] == local["outputs"]
    assert remote["outputs"]["succeeded"] == 200
    assert remote["outputs"]["texts"] == [f"xk{i:04d}" for i in range(200)]
    assert remote["steps"]["call"]["succeeded"] == 200
    if child_items:
        pieces = sorted((arg["slice"]["start"], arg["slice"]["stop"]) for _id, arg in children)
        assert pieces == [(0, 60), (60, 120), (120, 180), (180, 200)]
        assert all("calls" not in arg and arg["slice"]["skip"] == [] for _id, arg in children)  # by reference
        assert len({wid.rsplit("/", 1)[0] for wid, _arg in children}) == 1  # <run's workflow id>/call/0/<n>
    else:
        assert children == []


async def _children_of(client: Any, *, expected: int) -> list[tuple[str, dict[str, Any]]]:
    """The child workflows of large fan-outs on the server (id, argument), once ``expected`` are listed."""
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        found = [w async for w in client.list_workflows(f'WorkflowType="{CHILD_WORKFLOW}"')]
        if len(found) >= expected and (expected or asyncio.get_running_loop().time() > deadline - 13):
            break
        assert asyncio.get_running_loop().time() < deadline, found
        await asyncio.sleep(0.2)
    out: list[tuple[str, dict[str, Any]]] = []
    for w in found:
        history = await client.get_workflow_handle(w.id, run_id=w.run_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        arg = (await client.data_converter.decode(started.input.payloads))[0]
        requests = await _activity_requests(client, w.id, w.run_id)
        assert requests and all("items" not in r and "slice" in r for r in requests), requests  # never the calls
        out.append((w.id, arg))
    return out


async def _activity_requests(client: Any, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
    """What the call activities of a workflow were given (from its history)."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    out: list[dict[str, Any]] = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            payloads = event.activity_task_scheduled_event_attributes.input.payloads
            out.append((await client.data_converter.decode(payloads))[0])
    return out


def test_tool_errors_exit_as_locally(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 3, mode="tool-error")
    local_code, _out, _err = _local(str(workflow), "--json", "--state-dir", str(tmp_path / "s"))

    async def on_temporal() -> tuple[int, str, str]:
        async with dev_server() as env, in_process_worker(env, "err"):
            return await cli(str(workflow), "--engine", "temporal", "--temporal-address", target_of(env),
                             "--task-queue", "err", "--json")  # fmt: skip

    code, out, err = asyncio.run(on_temporal())
    assert code == local_code == 1, err
    assert summary_of(out)["status"] == "failed"
    assert {f["kind"] for f in summary_of(out)["failed"]} == {"tool-error"}


def test_temporal_unreachable_exits_4(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 1)
    code, _out, err = asyncio.run(cli(str(workflow), "--engine", "temporal", "--temporal-address", "127.0.0.1:9"))
    assert code == 4, err
    assert "cannot reach Temporal at 127.0.0.1:9" in err
    assert "Traceback" not in err


def test_environment_values_never_enter_the_history(tmp_path: Path) -> None:
    """A variable read by arguments reaches the server (the worker puts its value back), but neither the
    arguments nor the result in Temporal's history hold it: the activity masks what it returns."""
    secret = "s3cr3t-value-of-the-token"
    calls = tmp_path / "calls"
    command = json.dumps([sys.executable, str(MODES), "typed", "--count-file", str(calls)])
    workflow = tmp_path / "secret.yaml"
    workflow.write_text(
        f"""\
version: 1
name: secret
servers:
  modes:
    command: {command}
steps:
  say:
    server: modes
    tool: convert_time
    args: {{text: "token=${{{{ env.MCP_RUN_TEST_TOKEN }}}}"}}
outputs:
  said: ${{{{ steps.say.text }}}}
"""
    )

    async def on_temporal() -> tuple[tuple[int, str, str], bytes]:
        async with dev_server() as env, in_process_worker(env, "sec"):
            where = ("--temporal-address", target_of(env), "--task-queue", "sec")
            result = await cli(str(workflow), "--engine", "temporal", *where, "--json",
                               env={"MCP_RUN_TEST_TOKEN": secret})  # fmt: skip
            run_id = summary_of(result[1])["run_id"]
            from runner.temporal.client import workflow_id

            history = await env.client.get_workflow_handle(workflow_id(run_id)).fetch_history()
            return result, b"".join(event.SerializeToString() for event in history.events)

    os.environ.pop("MCP_RUN_TEST_TOKEN", None)
    os.environ["MCP_RUN_TEST_TOKEN"] = secret  # the in-process worker's environment
    try:
        (code, out, err), history = asyncio.run(on_temporal())
    finally:
        del os.environ["MCP_RUN_TEST_TOKEN"]
    assert code == 0, err
    assert secret in calls.read_text()  # it reached the server
    assert b"MCP_RUN_TEST_TOKEN" in history  # the placeholder did travel
    assert secret.encode() not in history
    assert secret not in out


def test_text_that_looks_like_a_placeholder_reaches_the_server_as_that_text(tmp_path: Path) -> None:
    """An input, and a server's result, holding ``***env.NAME***`` are text: the activity decodes only the
    placeholders the workflow's own templates made (``env.NAME``), so the server gets the text back, as from
    a local run, and the real value only where the workflow read the variable."""
    secret = "s3cr3t-value-of-the-token"
    forged = "***env.MCP_RUN_TEST_TOKEN***"
    calls = tmp_path / "calls"
    command = json.dumps([sys.executable, str(MODES), "typed", "--count-file", str(calls)])
    workflow = tmp_path / "forged.yaml"
    workflow.write_text(
        f"""\
version: 1
name: forged
servers:
  modes:
    command: {command}
inputs:
  note: {{type: string}}
steps:
  first:
    server: modes
    tool: convert_time
    args: {{text: "${{{{ inputs.note }}}}", real: "${{{{ env.MCP_RUN_TEST_TOKEN }}}}"}}
  second:
    server: modes
    tool: convert_time
    args: {{text: "${{{{ from_json(steps.first.text).text }}}}"}}
"""
    )

    async def on_temporal() -> tuple[int, str, str]:
        async with dev_server() as env, in_process_worker(env, "forged"):
            where = ("--temporal-address", target_of(env), "--task-queue", "forged")
            return await cli(str(workflow), "--engine", "temporal", *where, "--json", "--input", f"note={forged}",
                             env={"MCP_RUN_TEST_TOKEN": secret})  # fmt: skip

    os.environ["MCP_RUN_TEST_TOKEN"] = secret  # the in-process worker's environment
    try:
        code, _, err = asyncio.run(on_temporal())
    finally:
        del os.environ["MCP_RUN_TEST_TOKEN"]
    assert code == 0, err
    sent = [json.loads(line.split(" ", 1)[1]) for line in calls.read_text().splitlines()]
    assert sent == [{"real": secret, "text": forged}, {"text": forged}]


def test_detach_resume_export_and_cancel(tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # never opened: the calls wait until the run is cancelled
    workflow = fan_out_workflow(tmp_path, 5, mode="count", extra=f"--count-file {tmp_path / 'counts'} --gate {gate}")

    async def on_temporal() -> tuple[str, list[dict[str, object]], str]:
        async with dev_server() as env, in_process_worker(env, "det"):
            where = ("--temporal-address", target_of(env), "--task-queue", "det")
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where, "--detach")
            assert code == 0, err
            run_id = err.split()[1]
            # One open run per workflow file, as locally: a second start is refused as busy (by Temporal itself, at
            # once: the file's workflow id is open); --resume follows the first.
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where)
            assert code == 6 and f"run {run_id} of" in err and "is running on Temporal" in err, err
            assert "--resume" in err, err
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where, "--resume", "--detach")
            assert code == 0 and f"following run {run_id}" in err, err
            code, journal, err = await cli("export", run_id, "--engine", "temporal", *where[:2])
            assert code == 0, err
            code, _out, err = await cli("cancel", run_id, "--engine", "temporal", *where[:2])
            assert code == 0, err
            from runner.temporal.client import workflow_id

            handle = env.client.get_workflow_handle(workflow_id(run_id))
            status = (await handle.describe()).status
            for _ in range(100):
                if status is not None and status.name != "RUNNING":
                    break
                await asyncio.sleep(0.1)
                status = (await handle.describe()).status
            return run_id, [json.loads(line) for line in journal.splitlines()], status.name if status else ""

    run_id, events, status = asyncio.run(on_temporal())
    assert events[0]["type"] == "run_started" and events[0]["run_id"] == run_id
    assert events[0]["seq"] == 1 and [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[1]["type"] == "step_started" and events[1]["items"] == 5
    assert status == "CANCELED"


def test_a_call_the_tool_list_refuses_is_not_sent_as_locally(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 2)
    workflow.write_text(workflow.read_text().replace("tool: echo", "tool: ecko"))
    local_code, local_out, _err = _local(str(workflow), "--json", "--state-dir", str(tmp_path / "s"))

    async def on_temporal() -> tuple[int, str, str]:
        async with dev_server() as env, in_process_worker(env, "inv"):
            return await cli(str(workflow), "--engine", "temporal", "--temporal-address", target_of(env),
                             "--task-queue", "inv", "--json")  # fmt: skip

    code, out, err = asyncio.run(on_temporal())
    assert code == local_code, err
    kinds = [(f["item"], f["kind"], f["error"]) for f in summary_of(out)["failed"]]
    assert kinds == [(f["item"], f["kind"], f["error"]) for f in summary_of(local_out)["failed"]]
    assert {kind for _item, kind, _error in kinds} == {"invalid-call"}


def test_progress_is_exported_and_server_logs_reach_the_worker_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    workflow = fan_out_workflow(tmp_path, 3, mode="progress")

    async def on_temporal() -> list[dict[str, object]]:
        async with dev_server() as env, in_process_worker(env, "prog"):
            where = ("--temporal-address", target_of(env), "--task-queue", "prog")
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where, "--server-log-level", "warning")
            assert code == 0, err
            run_id = err.split()[1]
            code, journal, err = await cli("export", run_id, "--engine", "temporal", *where[:2])
            assert code == 0, err
            return [json.loads(line) for line in journal.splitlines()]

    events = asyncio.run(on_temporal())
    progress = [e for e in events if e["type"] == "progress"]
    assert len(progress) == 3, events
    assert {(e["progress"], e["total"], e["message"]) for e in progress} == {(1, 2, "half way")}
    for e in progress:  # each before its item's end
        end = next(x for x in events if x["type"] == "item_succeeded" and x["item"] == e["item"])
        assert e["seq"] < end["seq"]
    err = capfd.readouterr().err
    assert err.count("[modes] [warning modes] warning about x") == 3, err
    assert "debug about" not in err


def test_progress_of_a_slow_call_reaches_the_run_while_it_runs(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 1, mode="progress", extra="--delay 4")

    async def on_temporal() -> tuple[str, list[dict[str, object]]]:
        async with dev_server() as env, in_process_worker(env, "slow"):
            where = ("--temporal-address", target_of(env), "--task-queue", "slow")
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where)
            assert code == 0, err
            run_id = err.split()[1]
            code, journal, export_err = await cli("export", run_id, "--engine", "temporal", *where[:2])
            assert code == 0, export_err
            return err, [json.loads(line) for line in journal.splitlines()]

    err, events = asyncio.run(on_temporal())
    progress = [(e["progress"], e["message"]) for e in events if e["type"] == "progress"]
    assert progress == [(1, "half way"), (2, "done")], events  # the first signalled while the call ran
    assert ": 1/2 half way" in err  # the run's view showed it
