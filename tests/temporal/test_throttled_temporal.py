"""Throttles (429 / 503 with Retry-After) on Temporal: the worker returns each ``server_throttled`` record its
link heard with the outcome of the item whose call was refused, built by the local scheduler's own function
(:func:`runner.engine.calls.servers.throttled_event`), and the workflow journals it before the item's end. No
server, no Temporal (trio's virtual clock); then a real run on Temporal's dev server against a rate-limiting
loopback server (:mod:`tests.fakes.throttled_http`), whose exported journal holds one ``server_throttled``
record per 429 the server sent."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import trio

import runner.temporal.batch as batch_module
from runner.errors import Throttled
from runner.temporal.batch import THROTTLES_KEPT, Batch, Sessions
from runner.temporal.markers import Markers
from runner.temporal.spec import RunSpec, build_plan_of
from runner.workflow.plan import PlannedStep
from tests.e2e.support import throttled_server
from tests.harness import FANOUT, Harness, echo_tools, plan_of, run_plan
from tests.temporal.support import cli, dev_server, in_process_worker, target_of

WORKFLOW = FANOUT.replace("ITEMS", '["a"]')


def _refusing(times: int = 1, setup: Any = echo_tools) -> Harness:
    harness = Harness({"s": setup})
    refusals = iter([Throttled("429", status_code=429, retry_after=2.0)] * times)
    harness.refuse = lambda: next(refusals, None)
    return harness


async def _commit(details: dict[str, Any]) -> None:
    return None


async def _batch_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, harness: Harness) -> dict[str, Any]:
    """The outcome of item ``a`` called by a worker's batch on ``harness``'s server."""
    monkeypatch.setattr(batch_module, "make_opener", lambda *args, **kwargs: harness.opener)
    path = tmp_path / "fan.yaml"
    path.write_text(WORKFLOW)
    spec = RunSpec(run_id="r", workflow=str(path), text=WORKFLOW)
    items = [{"key": "a", "index": 0, "args": {"text": "a"}}]
    async with trio.open_nursery() as nursery:
        sessions = Sessions(nursery)
        [outcome] = await Batch(sessions, spec, "fan", items, Markers(_commit)).run()
        sessions.close()
    assert outcome["status"] == "succeeded" and len(harness.calls("s")) == 1
    return outcome


async def test_the_worker_returns_the_throttle_with_the_outcome_as_a_local_run_journals_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    local: list[dict[str, Any]] = []
    await run_plan(plan_of(WORKFLOW), _refusing(), events=local)
    [journaled] = [e for e in local if e["type"] == "server_throttled"]

    outcome = await _batch_outcome(tmp_path, monkeypatch, _refusing())
    assert outcome["throttled"] == [{k: v for k, v in journaled.items() if k not in ("seq", "ts")}]
    assert outcome["throttled"][0]["status"] == 429 and outcome["throttled"][0]["pause_s"] == 2.0


async def test_an_outcome_carries_a_bounded_number_of_throttles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    outcome = await _batch_outcome(tmp_path, monkeypatch, _refusing(THROTTLES_KEPT + 3))
    assert len(outcome["throttled"]) == THROTTLES_KEPT  # the history stays small however often it is refused


RECORD = {"type": "server_throttled", "server": "s", "status": 429, "pause_s": 2.0, "limit": 4, "cut": True}


def _flow(monkeypatch: pytest.MonkeyPatch, text: str, step: str) -> tuple[Any, PlannedStep, list[Any]]:
    """A workflow object outside Temporal, step ``step`` of ``text`` planned, and the events it journals."""
    import runner.temporal.dag as dag

    flow = dag.DagWorkflow()
    emitted: list[Any] = []
    monkeypatch.setattr(flow, "_emit", emitted.append)
    return flow, build_plan_of(RunSpec(run_id="r", workflow="/w.yaml", text=text)).steps[step], emitted


def test_the_workflow_journals_an_outcomes_throttles_before_the_items_end(monkeypatch: pytest.MonkeyPatch) -> None:
    flow, ps, emitted = _flow(monkeypatch, WORKFLOW, "fan")
    call = {"key": "a", "index": 0}
    flow._apply(ps, call, {"key": "a", "status": "succeeded", "result": {}, "throttled": [RECORD, {"type": "log"}]})
    assert [e.type for e in emitted] == ["server_throttled", "item_succeeded"]  # a record of another type: dropped
    assert (emitted[0].server, emitted[0].status, emitted[0].pause_s, emitted[0].cut) == ("s", 429, 2.0, True)
    emitted.clear()
    flow._apply(ps, call, {"key": "a", "status": "succeeded", "result": {}})  # as every outcome of before
    assert [e.type for e in emitted] == ["item_succeeded"]


@pytest.mark.slow  # the dev server, then a few seconds of the server's pace
@pytest.mark.integration
def test_a_run_on_temporal_journals_each_throttle_its_worker_met(tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(8)]
    with throttled_server(rate=4, burst=1, retry_after=1) as url:  # 8 calls at once: most are refused at first
        workflow = tmp_path / "fan.yaml"
        workflow.write_text(
            f"version: 1\nservers:\n  api:\n    url: {url}\nsteps:\n  fan:\n    server: api\n    tool: write\n"
            f"    for_each: {json.dumps(keys)}\n    key: ${{{{ item }}}}\n    args: {{key: '${{{{ item }}}}'}}\n"
        )

        async def on_temporal() -> list[dict[str, Any]]:
            async with dev_server() as env, in_process_worker(env, "throttled"):
                where = ("--temporal-address", target_of(env), "--task-queue", "throttled")
                code, _out, err = await cli(str(workflow), "--engine", "temporal", *where)
                assert code == 0, err
                code, journal, err = await cli("export", err.split()[1], "--engine", "temporal", *where[:2])
                assert code == 0, err
                return [json.loads(line) for line in journal.splitlines()]

        events = asyncio.run(on_temporal())
        with urllib.request.urlopen(url.replace("/mcp", "/stats"), timeout=10) as answer:
            stats = json.load(answer)
    assert stats["executed"] == dict.fromkeys(keys, 1)  # refused calls were sent again, each key run once
    throttles = [e for e in events if e["type"] == "server_throttled"]
    assert stats["throttled"] > 0 and len(throttles) == stats["throttled"], (stats, throttles)
    assert all(e["server"] == "api" and e["status"] == 429 and e["pause_s"] == 1.0 for e in throttles), throttles
    assert any(e.get("cut") for e in throttles)  # the pace was lowered


async def test_a_reconcile_ask_refused_for_now_is_asked_after_the_pause_and_its_throttle_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    from runner.temporal.batch import ask_reconcile
    from tests.test_reconcile import WORKFLOW as RECONCILED
    from tests.test_reconcile import Bank

    bank = Bank()
    bank.charged["k0"] = 1
    harness = _refusing(setup=bank.setup)
    monkeypatch.setattr(batch_module, "make_opener", lambda *args, **kwargs: harness.opener)
    path = tmp_path / "charge.yaml"
    path.write_text(RECONCILED)
    spec = RunSpec(run_id="r", workflow=str(path), text=RECONCILED)
    async with trio.open_nursery() as nursery:
        sessions = Sessions(nursery)
        [answer] = await ask_reconcile(sessions, spec, "charge", [{"key": "k0", "args": {"id": "k0", "amount": 5}}])
        sessions.close()
    assert bank.asked == ["k0"] and bank.asked_at == [pytest.approx(2.0)]  # once, after the pause asked for
    assert answer["result"]["content"][0]["text"] == '{"charged": true}'
    [record] = answer["throttled"]
    assert (record["type"], record["server"], record["status"]) == ("server_throttled", "s", 429)
    assert record["pause_s"] == 2.0
    assert harness.opened == ["s"]  # a refusal is no lost session


def test_the_workflow_journals_a_reconcile_asks_throttles_before_its_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_reconcile import WORKFLOW as RECONCILED

    flow, ps, emitted = _flow(monkeypatch, RECONCILED, "charge")
    call = {"key": "k0", "index": 0}
    context = {"key": "k0", "args": {"id": "k0", "amount": 5}, "item": "k0"}
    answer = {"key": "k0", "result": {"content": [{"type": "text", "text": '{"charged": true}'}]}}
    verdict = flow._verdict(ps, call, context, {**answer, "throttled": [RECORD]}, at_end=False)
    assert [e.type for e in emitted] == ["server_throttled", "item_reconciled"] and verdict.verdict == "done"
    emitted.clear()
    flow._verdict(ps, call, context, answer, at_end=False)  # as every answer of before
    assert [e.type for e in emitted] == ["item_reconciled"]
