"""A batch activity renders its slice from the definition of ITS run, never from another run of the same file.

Every run of a file has the same workflow id (one open run per file), so the run is named by its Temporal run
id too: a late activity of a closed run must not read the next run's definition (other items, other
arguments), and a worker that served an earlier run of the same text must not reuse that run's definition
(its ``env`` may differ)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from temporalio.testing import ActivityEnvironment

from runner.temporal.activities import CallActivities
from runner.temporal.batch import Sessions
from runner.temporal.bridge import TrioThread
from runner.temporal.fanout import child_arg
from runner.temporal.spec import RunSpec, build_plan_of

WORKFLOW = """\
version: 1
name: fan
servers:
  s: {command: [echo]}
inputs:
  names: {type: array, default: [a, b, c]}
steps:
  first:
    server: s
    tool: t
    for_each: ${{ inputs.names }}
    key: "${{ item }}-${{ env.TOKEN || 'none' }}"
    args: {text: "${{ item }}"}
"""

WID = "mcp-run/0123456789abcdef"


class _Handle:
    def __init__(self, client: _Client, run_id: str | None) -> None:
        self._client = client
        self._run_id = run_id
        self.id = WID
        self.run_id = run_id

    async def query(self, name: str, *args: Any, **kwargs: Any) -> Any:
        assert name == "definition"
        self._client.asked += 1
        await asyncio.sleep(0)  # the other batches of the run start meanwhile
        run_id = self._run_id if self._run_id is not None else self._client.newest
        return self._client.runs[run_id].to_json()


class _Client:
    """Temporal as the activity sees it: runs of one workflow id, the newest answering an unpinned handle."""

    def __init__(self, runs: dict[str, RunSpec], newest: str) -> None:
        self.runs = runs
        self.newest = newest
        self.asked = 0

    def get_workflow_handle(self, workflow_id: str, *, run_id: str | None = None, **kwargs: Any) -> _Handle:
        assert workflow_id == WID
        return _Handle(self, run_id)


def _activities() -> CallActivities:
    return CallActivities(thread=cast(TrioThread, None), sessions=Sessions(nursery=cast(Any, None)))


def _request(spec: RunSpec, temporal_run: str) -> dict[str, Any]:
    piece = {"start": 0, "stop": 3, "skip": []}
    return {"plan_key": spec.plan_key, "run": WID, "run_id": temporal_run, "step": "first", "slice": piece}


def test_a_late_activity_reads_its_own_run_not_the_newest_run_of_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "w.yaml")
    old = RunSpec(run_id="a", workflow=path, text=WORKFLOW, inputs={"names": ["a", "b", "c"]})
    new = RunSpec(run_id="b", workflow=path, text=WORKFLOW, inputs={"names": ["x", "y", "z"]})
    client = _Client({"t-a": old, "t-b": new}, newest="t-b")  # run a closed, run b of the same file started
    env = ActivityEnvironment(client=cast(Any, client))
    keys = asyncio.run(env.run(_activities().slice_keys, _request(old, "t-a")))
    assert [k["key"] for k in keys] == ["a-none", "b-none", "c-none"]


def test_a_worker_does_not_reuse_another_runs_definition_of_the_same_text(tmp_path: Path) -> None:
    path = str(tmp_path / "w.yaml")
    unset = RunSpec(run_id="a", workflow=path, text=WORKFLOW, env={"TOKEN": False})
    given = RunSpec(run_id="b", workflow=path, text=WORKFLOW, env={"TOKEN": True})
    assert unset.plan_key == given.plan_key  # same text, path and inputs: the same plan
    client = _Client({"t-a": unset, "t-b": given}, newest="t-b")
    env = ActivityEnvironment(client=cast(Any, client))
    activities = _activities()
    first = asyncio.run(env.run(activities.slice_keys, _request(unset, "t-a")))
    second = asyncio.run(env.run(activities.slice_keys, _request(given, "t-b")))
    assert [k["key"] for k in first] == ["a-none", "b-none", "c-none"]
    assert [k["key"] for k in second] == ["a-***env.TOKEN***", "b-***env.TOKEN***", "c-***env.TOKEN***"]


def test_a_child_is_told_its_parents_temporal_run(tmp_path: Path) -> None:
    spec = RunSpec(run_id="a", workflow=str(tmp_path / "w.yaml"), text=WORKFLOW, child_items=2)
    ps = build_plan_of(spec).steps["first"]
    part = [{"key": "a-none", "index": 0, "args": {"text": "a"}, "at": 0}]
    arg = child_arg(spec, ps, part, WID, "t-a")
    assert (arg["parent"], arg["parent_run"]) == (WID, "t-a")


def test_a_worker_keeps_the_definitions_of_its_latest_runs_only(tmp_path: Path) -> None:
    from runner.temporal.activities import SPECS_KEPT

    path = str(tmp_path / "w.yaml")
    runs = {f"t-{n}": RunSpec(run_id=str(n), workflow=path, text=WORKFLOW) for n in range(SPECS_KEPT + 5)}
    client = _Client(runs, newest=f"t-{SPECS_KEPT + 4}")
    env = ActivityEnvironment(client=cast(Any, client))
    activities = _activities()
    for temporal_run, spec in runs.items():
        asyncio.run(env.run(activities.slice_keys, _request(spec, temporal_run)))
    assert len(activities.specs) == SPECS_KEPT
    assert [key.rsplit("/", 1)[1] for key in activities.specs][-1] == f"t-{SPECS_KEPT + 4}"


def test_the_batches_of_a_run_that_start_together_ask_its_definition_once(tmp_path: Path) -> None:
    spec = RunSpec(run_id="a", workflow=str(tmp_path / "w.yaml"), text=WORKFLOW)
    client = _Client({"t-a": spec}, newest="t-a")
    env = ActivityEnvironment(client=cast(Any, client))
    activities = _activities()

    async def batches() -> list[Any]:
        return await asyncio.gather(*(env.run(activities.slice_keys, _request(spec, "t-a")) for _ in range(5)))

    answers = asyncio.run(batches())
    assert client.asked == 1  # one query (a workflow task) for the five, not one each
    assert all([k["key"] for k in keys] == ["a-none", "b-none", "c-none"] for keys in answers)
    assert not activities.asking
