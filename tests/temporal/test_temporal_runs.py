"""The same workflow file on Temporal and on the local engine: the same outputs, statuses and exit codes."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from tests.temporal.support import ROOT, cli, dev_server, fan_out_workflow, in_process_worker, summary_of, target_of

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


def test_a_200_item_fan_out_gives_the_same_outputs(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 200)
    code, out, err = _local(str(workflow), "--json", "--state-dir", str(tmp_path / "s"))
    assert code == 0, err
    local = summary_of(out)

    async def on_temporal() -> tuple[int, str, str]:
        async with dev_server() as env, in_process_worker(env, "fan"):
            where = ("--temporal-address", target_of(env), "--task-queue", "fan")
            return await cli(str(workflow), "--engine", "temporal", *where, "--json", "--batch-size", "50")

    code, out, err = asyncio.run(on_temporal())
    assert code == 0, err
    remote = summary_of(out)
    assert remote["outputs"] == local["outputs"]
    assert remote["outputs"]["succeeded"] == 200
    assert remote["outputs"]["texts"] == [f"xk{i:04d}" for i in range(200)]
    assert remote["steps"]["call"]["succeeded"] == 200


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
