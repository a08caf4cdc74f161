"""``reconcile:``: on resume, an item left in doubt is settled by asking the server whether its call happened.

The scenario of issue 31: a side-effecting fan-out (``charge``, not safe to repeat) is killed mid-batch (its
journal cut right after the ``n``-th dispatch, what a kill -9 leaves); the server knows which keys it processed
(``was_charged``). A resume with no decision then finishes the batch: each key is charged exactly once, for
every kill point, whether the last call sent reached the server or not. A reconcile tool that fails leaves the
item in doubt; ``validate`` refuses a reconcile tool not declared safe to repeat.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
import trio

from runner.cli.runrecord import load, run_record, show_record
from runner.cli.runtext import render_runs, render_show
from runner.engine.core.items import ArgsFailed, rendered_args
from runner.engine.core.reconcile import (
    NOT_DONE_AT_END,
    left_in_doubt,
    reconcile_args,
    reconcile_context,
    verdict,
    verdict_entry,
)
from runner.engine.core.vocabulary import ItemStatus
from runner.engine.journal.rundir import RunDir
from runner.errors import Throttled, WorkflowError
from runner.exitcodes import ExitCode
from runner.workflow.loader import parse_workflow, validate
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, Resume, plan_of, run_plan
from tests.support import folded

N = 6
WORKFLOW = f"""
version: 1
servers:
  s: {{command: [fake]}}
steps:
  charge:
    server: s
    tool: charge
    for_each: {[f"k{i}" for i in range(N)]}
    key: "${{{{ item }}}}"
    args: {{id: "${{{{ item }}}}", amount: 5}}
    reconcile:
      tool: was_charged
      args: {{id: "${{{{ key }}}}", amount: "${{{{ args.amount }}}}"}}
      done: "${{{{ result.json.charged }}}}"
      idempotent: true
  total:
    server: s
    tool: total
    args: {{ids: "${{{{ steps.charge.results[*].status }}}}"}}
"""


class Bank:
    """The server's memory, across runs: how many times each key was charged."""

    def __init__(self) -> None:
        self.charged: Counter[str] = Counter()
        self.asked: list[str] = []
        self.asked_at: list[float] = []  # when (trio's clock)
        self.broken = False  # was_charged answers with a tool error

    def setup(self, server: FakeServer) -> None:
        async def charge(call: FakeCall) -> dict[str, Any]:
            self.charged[call.arguments["id"]] += 1
            return text_result(f'{{"id": "{call.arguments["id"]}"}}')

        async def was_charged(call: FakeCall) -> dict[str, Any]:
            self.asked.append(call.arguments["id"])
            self.asked_at.append(trio.current_time())
            assert call.arguments["amount"] == 5
            if self.broken:
                return text_result("ledger unavailable", is_error=True)
            return text_result('{"charged": %s}' % ("true" if self.charged[call.arguments["id"]] else "false"))

        async def total(call: FakeCall) -> dict[str, Any]:
            return text_result(str(len(call.arguments["ids"])))

        server.tools.update(charge=charge, was_charged=was_charged, total=total)


def _killed_after(events: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The journal up to the ``n``-th dispatch of ``charge``, with no ``charge`` result: a kill -9 then."""
    seen, out = 0, []
    for event in events:
        if event["type"] in ("item_succeeded", "item_failed") and event.get("step") == "charge":
            continue
        out.append(event)
        if event["type"] == "item_dispatched" and event["step"] == "charge":
            seen += 1
            if seen == n:
                return out
    raise AssertionError(f"fewer than {n} dispatches")


async def _crashed(n: int, reached: int) -> tuple[list[dict[str, Any]], Bank]:
    """A run killed after ``n`` dispatches, of which the server processed the first ``reached``."""
    events: list[dict[str, Any]] = []
    await run_plan(plan_of(WORKFLOW), Harness({"s": Bank().setup}), events=events, concurrency=2)
    journal = _killed_after(events, n)
    dispatched = [e["item"] for e in journal if e["type"] == "item_dispatched"]
    bank = Bank()
    bank.charged.update(dispatched[:reached])
    return journal, bank


@pytest.mark.parametrize(("n", "reached"), [(n, r) for n in range(1, N + 1) for r in (n - 1, n)])
async def test_a_resume_after_a_kill_charges_every_key_exactly_once(
    n: int, reached: int, autojump_clock: trio.abc.Clock
) -> None:
    journal, bank = await _crashed(n, reached)
    assert len(folded(journal).in_doubt()) == n
    events: list[dict[str, Any]] = []
    outcome = await run_plan(
        plan_of(WORKFLOW), Harness({"s": bank.setup}), prior=Resume(events=journal), events=events, concurrency=2
    )
    assert outcome.exit_code == ExitCode.OK and not outcome.blocked
    assert bank.charged == Counter({f"k{i}": 1 for i in range(N)})
    assert not [e for e in events if e["type"] == "doubt_decided"]
    verdicts = {e["item"]: e["verdict"] for e in events if e["type"] == "item_reconciled"}
    dispatched = [e["item"] for e in journal if e["type"] == "item_dispatched"]
    assert verdicts == {key: "done" if i < reached else "not-done" for i, key in enumerate(dispatched)}
    state = folded(journal + events)
    assert all(state.item("charge", key).reconciled for key in dispatched[:reached])  # type: ignore[union-attr]
    assert state.steps["total"].items[""].result["content"][0]["text"] == str(N)  # type: ignore[index]


async def test_each_verdict_is_journaled_before_it_acts(autojump_clock: trio.abc.Clock) -> None:
    journal, bank = await _crashed(3, 2)
    events: list[dict[str, Any]] = []
    await run_plan(plan_of(WORKFLOW), Harness({"s": bank.setup}), prior=Resume(events=journal), events=events)
    last = [e["item"] for e in journal if e["type"] == "item_dispatched"][-1]  # it never reached the server
    mine = [e for e in events if e.get("item") == last]
    assert [e["type"] for e in mine[:3]] == ["item_reconciled", "item_dispatched", "item_succeeded"]


async def test_a_reconcile_tool_that_fails_leaves_the_item_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    journal, bank = await _crashed(3, 3)
    bank.broken = True
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(WORKFLOW), Harness({"s": bank.setup}), prior=Resume(events=journal), events=events)
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    assert bank.charged == Counter({f"k{i}": 1 for i in range(N)})  # 3 before the kill, 3 never sent before
    state = folded(journal + events)
    dispatched = [e["item"] for e in journal if e["type"] == "item_dispatched"]
    assert sorted(item.key for _sid, item in state.in_doubt()) == sorted(dispatched)
    assert {e["verdict"] for e in events if e["type"] == "item_reconciled"} == {"error"}
    assert all(e["error"].startswith("the reconcile tool failed") for e in events if e["type"] == "item_reconciled")
    # The next resume, with the ledger back, settles them.
    bank.broken = False
    more: list[dict[str, Any]] = []
    again = await run_plan(
        plan_of(WORKFLOW), Harness({"s": bank.setup}), prior=Resume(events=journal + events), events=more
    )
    assert again.exit_code == ExitCode.OK and bank.charged == Counter({f"k{i}": 1 for i in range(N)})
    settled = folded(journal + events + more)
    assert all(settled.item("charge", key).status is ItemStatus.SUCCEEDED for key in dispatched)  # type: ignore[union-attr]


async def test_a_decision_given_wins_over_the_reconcile_tool(autojump_clock: trio.abc.Clock) -> None:
    journal, bank = await _crashed(2, 2)
    events: list[dict[str, Any]] = []
    outcome = await run_plan(
        plan_of(WORKFLOW), Harness({"s": bank.setup}), prior=Resume(events=journal, in_doubt="skip"), events=events
    )
    assert not bank.asked and outcome.exit_code != ExitCode.OK  # skipped in doubt: they count as failed
    assert [e["keys"] for e in events if e["type"] == "doubt_decided"] == [["k0", "k1"]]


def test_validate_refuses_a_reconcile_tool_not_declared_safe_to_repeat() -> None:
    text = WORKFLOW.replace("      idempotent: true\n", "")
    with pytest.raises(WorkflowError) as info:
        validate(parse_workflow(text, file="flow.yaml"))
    assert "steps.charge.reconcile.tool: the reconcile tool 'was_charged' must be safe to repeat" in str(info.value)
    trusted = text.replace("s: {command: [fake]}", "s: {command: [fake], trust_annotations: true}")
    validate(parse_workflow(trusted, file="flow.yaml"))  # the server's annotations then say (at run time)


def test_reconcile_templates_may_read_key_and_args_only_there() -> None:
    text = WORKFLOW.replace('args: {id: "${{ item }}", amount: 5}', 'args: {id: "${{ key }}", amount: 5}')
    with pytest.raises(WorkflowError) as info:
        validate(parse_workflow(text, file="flow.yaml"))
    assert "unknown name 'key'" in str(info.value)


SLOW = WORKFLOW.replace("    tool: charge\n", "    tool: charge\n    timeout: 1s\n")


class SlowBank(Bank):
    """A bank whose ``charge`` outlives the client's timeout for some keys: ``late`` charges after it (the call
    is still running when the client gives up), ``slow`` charges at once and answers after it."""

    def __init__(self, *, late: Collection[str] = (), slow: Collection[str] = ()) -> None:
        super().__init__()
        self.late, self.slow = set(late), set(slow)

    def setup(self, server: FakeServer) -> None:
        super().setup(server)
        charge = server.tools["charge"]

        async def slow_charge(call: FakeCall) -> dict[str, Any]:
            key = call.arguments["id"]
            if key in self.late:
                await trio.sleep(5)  # the client timed out at 1 s: in doubt, not charged yet
            answer = await charge(call)
            if key in self.slow:
                await trio.sleep(5)  # charged; the answer comes too late
            return answer

        server.tools["charge"] = slow_charge


async def test_at_the_end_of_the_step_a_done_settles_an_item_its_call_left_in_doubt(
    autojump_clock: trio.abc.Clock,
) -> None:
    bank = SlowBank(slow={"k1", "k4"})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(SLOW), Harness({"s": bank.setup}), events=events)
    assert outcome.exit_code == ExitCode.OK and not outcome.in_doubt
    assert bank.charged == Counter({f"k{i}": 1 for i in range(N)})
    verdicts = [(e["item"], e["verdict"]) for e in events if e["type"] == "item_reconciled"]
    assert sorted(verdicts) == [("k1", "done"), ("k4", "done")]
    state = folded(events)
    assert state.item("charge", "k1").reconciled  # type: ignore[union-attr]
    assert state.steps["total"].items[""].result["content"][0]["text"] == str(N)  # type: ignore[index]
    # the verdict comes after the call's doubt, and before the step's end
    types = [e["type"] for e in events if e.get("item") == "k1" or e["type"] == "step_finished"]
    assert types.index("item_reconciled") > types.index("item_failed")
    assert types.index("item_reconciled") < types.index("step_finished")


async def test_at_the_end_of_the_step_a_not_done_is_not_acted_on_the_resume_asks_again(
    autojump_clock: trio.abc.Clock,
) -> None:
    bank = SlowBank(late={"k2"})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(SLOW), Harness({"s": bank.setup}), events=events)
    assert outcome.exit_code == ExitCode.OUTCOME_UNKNOWN
    assert [d["item"] for d in outcome.in_doubt] == ["k2"]
    [record] = [e for e in events if e["type"] == "item_reconciled"]
    assert record["verdict"] == "error" and record["error"] == NOT_DONE_AT_END
    assert "k2" not in bank.charged  # (it was running on the server when asked, and never called again)
    for happened in (True, False):  # the call happened on the server meanwhile, or never did
        later = SlowBank()
        later.charged.update(k for k in bank.charged)
        if happened:
            later.charged["k2"] += 1
        more: list[dict[str, Any]] = []
        again = await run_plan(plan_of(SLOW), Harness({"s": later.setup}), prior=Resume(events=events), events=more)
        assert again.exit_code == ExitCode.OK, happened
        assert later.charged == Counter({f"k{i}": 1 for i in range(N)}), happened
        [verdict] = [e["verdict"] for e in more if e["type"] == "item_reconciled"]
        assert verdict == ("done" if happened else "not-done")


async def test_show_and_runs_count_the_reconciled_items(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    bank = SlowBank(slow={"k1", "k4"})
    events: list[dict[str, Any]] = []
    await run_plan(plan_of(SLOW), Harness({"s": bank.setup}), events=events)
    run_id = "20261203T000000.000000Z-abcdef"
    run = tmp_path / "runs" / run_id
    run.mkdir(parents=True)
    started = {"seq": 1, "ts": events[0]["ts"], "type": "run_started", "run_id": run_id, "workflow": "wf.yaml"}
    lines = [started, *({**e, "seq": e["seq"] + 1} for e in events)]
    (run / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    loaded = load(RunDir(run))
    shown = show_record(loaded, now=0.0)
    assert (shown["steps"]["charge"]["reconciled"], shown["steps"]["charge"]["reused"]) == (2, 0)
    assert (shown["items"]["reconciled"], shown["items"]["reused"]) == (2, 0)  # the runs row
    assert "6 succeeded (2 reconciled)" in render_show(shown)
    assert render_runs([run_record(loaded, now=0.0)]).splitlines()[0].endswith("REUSED  RECONCILED")


def test_one_verdict_rule_for_both_executors() -> None:
    spec = plan_of(WORKFLOW).steps["charge"].reconcile
    assert spec is not None
    context = reconcile_context({"item": "k0", "index": 0}, "k0", {"id": "k0", "amount": 5})
    assert reconcile_args(spec, context) == {"id": "k0", "amount": 5}
    labelled = rendered_args(lambda _item, _index: [1], None, None, label="reconcile args")
    assert labelled == ArgsFailed("reconcile args rendered to list, expected an object")  # (the step's: "args")

    def said(charged: Any, *, at_end: bool = False, error: str | None = None) -> tuple[str, bool, Any]:
        result = text_result(f'{{"charged": {charged}}}') if error is None else None
        record = verdict(spec, context, step="charge", key="k0", index=0, result=result, error=error, at_end=at_end)
        settled, entry = verdict_entry(record, referenced=True)
        return record.verdict.value, settled, entry and entry["status"]

    assert said("true") == said("true", at_end=True) == ("done", True, "succeeded")
    assert said("false") == ("not-done", False, None)  # called now
    assert said("false", at_end=True) == ("error", True, "failed")  # (NOT_DONE_AT_END): stays in doubt
    assert said("1") == ("error", True, "failed")
    assert said("true", error="lost") == ("error", True, "failed")


def test_left_in_doubt_names_the_items_a_step_left_in_doubt_not_asked_yet() -> None:
    state = folded(
        [
            {"seq": 1, "ts": "2026-01-01T00:00:00.000Z", "type": "step_started", "step": "s", "items": 3},
            *(
                {"seq": 2 + i, "ts": "2026-01-01T00:00:00.000Z", "type": "item_dispatched", "step": "s", "item": k}
                for i, k in enumerate("abc")
            ),
            {"seq": 5, "ts": "2026-01-01T00:00:00.000Z", "type": "item_succeeded", "step": "s", "item": "c"},
        ]
    )
    assert left_in_doubt(state.steps["s"], ["a", "b", "c", "d"], asked={"b"}) == ["a"]


async def test_a_reconcile_ask_refused_for_now_waits_the_pause_and_is_journaled_as_a_throttle(
    autojump_clock: trio.abc.Clock,
) -> None:
    journal, bank = await _crashed(1, 1)  # k0 in doubt; the server did charge it
    harness = Harness({"s": bank.setup})
    refusals = iter([Throttled("429", status_code=429, retry_after=2.0)])
    harness.refuse = lambda: next(refusals, None)  # the resume's first call is the ask about k0
    events: list[dict[str, Any]] = []
    start = trio.current_time()
    outcome = await run_plan(plan_of(WORKFLOW), harness, prior=Resume(events=journal), events=events)
    assert outcome.exit_code == ExitCode.OK
    assert bank.charged == Counter({f"k{i}": 1 for i in range(N)})
    assert bank.asked == ["k0"]  # refused before it ran, then asked once, after the pause the server asked for
    assert [e["verdict"] for e in events if e["type"] == "item_reconciled"] == ["done"]
    throttles = [e for e in events if e["type"] == "server_throttled"]
    assert [(e["server"], e["status"], e["pause_s"]) for e in throttles] == [("s", 429, 2.0)]
    assert not [e for e in events if e["type"] in ("session_lost", "session_retrying")]  # a refusal is no loss
    assert harness.opened == ["s"] and bank.asked_at[0] - start == pytest.approx(2.0)


async def test_a_reconcile_ask_refused_past_the_budget_leaves_the_item_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    journal, bank = await _crashed(1, 1)
    harness = Harness({"s": bank.setup})
    harness.refuse = lambda: Throttled("429", status_code=429, retry_after=30.0)  # every call, for good
    text = WORKFLOW.replace("{command: [fake]}", "{command: [fake], reconnect: 100s}")
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(text), harness, prior=Resume(events=journal), events=events)
    assert outcome.exit_code != ExitCode.OK and not bank.asked
    [record] = [e for e in events if e["type"] == "item_reconciled"]
    assert record["verdict"] == "error" and "429" in record["error"]
    assert [item.key for _sid, item in folded(journal + events).in_doubt()] == ["k0"]
    assert bank.charged == Counter({"k0": 1})  # the others were refused too: never run
