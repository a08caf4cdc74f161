"""The pure step machine both executors share (runner.engine.core.steps and .items): each item's action, a
step's outcome from its items (draining included), the status of a step that fails before it runs, the view's
status, and the item keys (a secret in one, two alike)."""

from __future__ import annotations

from typing import Any

import pytest

from runner.engine.core.cache import CacheHit, CacheIndex, cache_digest
from runner.engine.core.events import AnyEvent, ItemFailed, ItemSucceeded, decode
from runner.engine.core.items import (
    ArgsFailed,
    ItemAction,
    awaiting_decision,
    item_action,
    rendered_args,
    settled_entry,
    step_keys,
)
from runner.engine.core.state import SKIPPED_IN_DOUBT, ItemState, RunState, StepState
from runner.engine.core.steps import Call, Ended, StepMachine, failed_status, step_outcome, view_status
from runner.engine.core.vocabulary import FailureKind, ItemStatus, StepStatus
from runner.masking import placeholders
from runner.workflow.context import make_context
from runner.workflow.template import TemplateError
from tests.harness import plan_of
from tests.support import folded

FAN = """
version: 1
servers:
  s: {command: [fake]}
steps:
  each:
    server: s
    tool: echo
    for_each: ${{ inputs.items }}
    KEY
    args: {x: "${{ item }}"}
inputs:
  items: {type: array, default: ["a", "b"]}
"""


def _item(status: ItemStatus, kind: FailureKind | None = None, **more: Any) -> ItemState:
    return ItemState(key="k", status=status, kind=kind, **more)


@pytest.mark.parametrize(
    ("prior", "action"),
    [
        (None, ItemAction.CALL),
        (_item(ItemStatus.SUCCEEDED), ItemAction.REUSE),
        (_item(ItemStatus.SKIPPED, FailureKind.SKIPPED_IN_DOUBT), ItemAction.SETTLED),
        (_item(ItemStatus.FAILED, FailureKind.TOOL_ERROR), ItemAction.CALL),
        (_item(ItemStatus.DISPATCHED, task_id="t1"), ItemAction.COLLECT),
        (_item(ItemStatus.IN_DOUBT, FailureKind.OUTCOME_UNKNOWN), ItemAction.RERUN),
        (_item(ItemStatus.DISPATCHED), ItemAction.RERUN),
    ],
)
def test_each_action(prior: ItemState | None, action: ItemAction) -> None:
    assert item_action(prior) is action
    assert action.calls == (action in (ItemAction.CALL, ItemAction.RERUN))


def _folded(*events: dict[str, Any]) -> RunState:
    state = RunState()
    for seq, event in enumerate(events, start=1):
        state.apply(decode({"seq": seq, "ts": "2026-12-02T00:00:00.000Z", **event}))
    return state


def test_a_decision_is_awaited_by_the_items_in_doubt_of_unchanged_steps_not_yet_decided() -> None:
    sent = {"type": "item_dispatched", "index": None, "server": "s", "tool": "t", "request_id": 1, "attempt": 1}
    sent["progress_token"] = 1
    state = _folded(
        {"type": "run_started", "run_id": "r", "workflow": "/w.yaml"},
        {**sent, "step": "a", "item": "k1"},
        {**sent, "step": "a", "item": "k2"},
        {**sent, "step": "a", "item": "done"},
        {"type": "item_succeeded", "step": "a", "item": "done", "index": None, "result": {}},
        {**sent, "step": "b", "item": "k1"},
        {**sent, "step": "gone", "item": "k1"},
        {**sent, "step": "task", "item": "k1"},
        {"type": "task_created", "step": "task", "item": "k1", "index": None, "server": "s", "task_id": "t1"},
        {**sent, "step": "later", "item": "k1"},
        {"type": "doubt_decided", "step": "later", "keys": ["k1"], "decision": "rerun"},
    )
    steps = {"a", "b", "task", "later"}
    assert awaiting_decision(state, steps) == {"a": ["k1", "k2"], "b": ["k1"]}
    assert awaiting_decision(state, steps, fresh={"b"}) == {"a": ["k1", "k2"]}
    # accepted and skipped items are settled by the fold: nothing awaits a decision after one
    state.apply(
        decode(
            {
                "seq": 12,
                "ts": "2026-12-02T00:00:00.000Z",
                "type": "doubt_decided",
                "step": "a",
                "keys": ["k1", "k2"],
                "decision": "accept",
            }
        )
    )
    assert item_action(state.item("a", "k1")) is ItemAction.REUSE
    assert awaiting_decision(state, steps) == {"b": ["k1"]}


def test_a_settled_item_keeps_its_error() -> None:
    assert settled_entry(_item(ItemStatus.SKIPPED, error="why"))["error"] == "why"
    assert settled_entry(None)["error"] == SKIPPED_IN_DOUBT


def test_arguments_that_are_not_an_object_fail_the_item() -> None:
    assert rendered_args(lambda item, index: {"x": item}, 1, 0) == {"x": 1}
    assert rendered_args(lambda item, index: [item], 1, 0) == ArgsFailed("args rendered to list, expected an object")

    def broken(item: Any, index: int | None) -> Any:
        raise TemplateError("no such field")

    assert rendered_args(broken, 1, 0) == ArgsFailed("no such field")


def _step(*items: ItemState) -> StepState:
    step = StepState(id="s")
    for n, item in enumerate(items):
        item.key = f"k{n}"
        step.items[item.key] = item
    return step


NOT_SENT = (ItemStatus.FAILED, FailureKind.NOT_SENT)
TOOL = (ItemStatus.FAILED, FailureKind.TOOL_ERROR)
DOUBT = (ItemStatus.IN_DOUBT, FailureKind.OUTCOME_UNKNOWN)
OK = (ItemStatus.SUCCEEDED, None)
SKIPPED = (ItemStatus.SKIPPED, FailureKind.SKIPPED_IN_DOUBT)
RUNNING = (ItemStatus.DISPATCHED, None)


@pytest.mark.parametrize(
    ("ended", "keys", "draining", "status"),
    [
        ([OK, OK], 2, False, StepStatus.SUCCEEDED),
        ([OK, TOOL], 2, False, StepStatus.FAILED),
        ([OK, NOT_SENT], 2, False, StepStatus.INCOMPLETE),
        ([NOT_SENT, TOOL], 2, False, StepStatus.FAILED),
        ([NOT_SENT, DOUBT], 2, False, StepStatus.FAILED),  # in doubt is not "not sent"
        ([OK, DOUBT], 2, False, StepStatus.FAILED),
        ([OK, SKIPPED], 2, False, StepStatus.FAILED),
        ([OK, RUNNING], 2, False, StepStatus.FAILED),  # dispatched, no end: in doubt
        ([OK, RUNNING], 2, True, StepStatus.INTERRUPTED),
        ([OK], 2, True, StepStatus.INTERRUPTED),  # an item that never ran, the run draining
        ([OK, OK], 2, True, StepStatus.SUCCEEDED),  # all ended before the drain
        ([OK, TOOL], 2, True, StepStatus.FAILED),
        ([OK], 2, False, StepStatus.SUCCEEDED),  # (not draining, an item not reached counts for nothing)
    ],
)
def test_the_outcome_table(
    ended: list[tuple[ItemStatus, FailureKind | None]], keys: int, draining: bool, status: StepStatus
) -> None:
    step = _step(*(ItemState(key="", status=s, kind=k) for s, k in ended))
    assert step_outcome(step, [f"k{n}" for n in range(keys)], draining=draining) is status


def test_only_the_items_of_this_attempt_count() -> None:
    step = _step(ItemState(key="", status=ItemStatus.SUCCEEDED), ItemState(key="", status=ItemStatus.FAILED))
    assert step_outcome(step, ["k0"]) is StepStatus.SUCCEEDED


def test_a_step_that_fails_before_it_runs() -> None:
    assert failed_status(FailureKind.NOT_SENT) is StepStatus.INCOMPLETE
    for kind in FailureKind:
        if kind is not FailureKind.NOT_SENT:
            assert failed_status(kind) is StepStatus.FAILED


def test_the_view_status() -> None:
    assert view_status(StepStatus.SUCCEEDED) == "succeeded"
    assert view_status(StepStatus.SKIPPED) == "skipped"
    for status in (StepStatus.FAILED, StepStatus.INCOMPLETE, StepStatus.INTERRUPTED):
        assert view_status(status) == "failed"


def _context(env: dict[str, Any]) -> Any:
    return lambda item, index: make_context(inputs={}, env=env, steps={}, item=item, index=index)


def test_keys_with_a_secret_are_refused_whoever_finds_it() -> None:
    plan = plan_of(FAN.replace("KEY", "key: ${{ item }}-${{ env.TAG }}"))
    ps = plan.steps["each"]
    local = _context({"TAG": "alpha"})
    with pytest.raises(TemplateError, match=r"the key of item 0 of step 'each' holds the value of env\.TAG; keys"):
        step_keys(ps, ["a"], local, secrets_in=lambda text: ["env.TAG"] if "alpha" in text else [])
    temporal = _context({"TAG": "***env.TAG***"})  # what the workflow's templates see
    with pytest.raises(TemplateError, match=r"holds the value of env\.TAG"):
        step_keys(ps, ["a"], temporal, secrets_in=placeholders)
    assert step_keys(ps, ["a", "b"], _context({"TAG": "t"}), secrets_in=placeholders) == ["a-t", "b-t"]


def test_two_items_with_one_key_are_refused() -> None:
    ps = plan_of(FAN.replace("KEY", "key: same")).steps["each"]
    with pytest.raises(TemplateError, match="items 0 and 1 have the same key 'same'"):
        step_keys(ps, ["a", "b"], _context({}), secrets_in=lambda text: [])


def test_the_machine_records_a_step_that_fails_before_it_runs() -> None:
    plan = plan_of(FAN.replace("KEY", ""))
    emitted: list[AnyEvent] = []
    machine = StepMachine(plan, folded([]), emitted.append, inputs={}, env={})
    ps = plan.steps["each"]
    machine.fail(ps, "unreachable", FailureKind.NOT_SENT)
    assert [(e.type, getattr(e, "status", None)) for e in emitted] == [("step_finished", "incomplete")]
    assert machine.stopped_by is None  # an incomplete step stops nothing
    machine.fail(ps, "bad if", FailureKind.TEMPLATE_ERROR)
    assert machine.stopped_by == "each"
    assert machine.views["each"]["status"] == "failed"


def test_the_machine_reuses_only_what_a_resume_finds() -> None:
    plan = plan_of(FAN.replace("KEY", ""))
    state = folded(
        [
            {"type": "step_started", "step": "each"},
            {"type": "item_dispatched", "step": "each", "item": "a"},
            {"type": "item_succeeded", "step": "each", "item": "a", "result": {}},
        ]
    )
    ps = plan.steps["each"]
    for resumed, fresh, reused in ((False, frozenset(), 0), (True, frozenset(), 1), (True, frozenset({"each"}), 0)):
        emitted: list[AnyEvent] = []
        machine = StepMachine(plan, state, emitted.append, inputs={}, env={}, resumed=resumed, fresh=fresh)
        assert machine.start(ps, ["a", "b"], ["a", "b"]) == reused
        assert machine.action("each", "a") is (ItemAction.REUSE if reused else ItemAction.CALL)


CACHED = """
version: 1
servers:
  s: {command: [fake]}
steps:
  each:
    server: s
    tool: echo
    for_each: ["1", "2", "c"]
    key: ${{ item }}
    args: {x: "${{ item }}"}
    cache: 7d
    cache_key: ${{ from_json(item) }}
"""


def test_before_a_call_its_cache_is_asked_the_one_rule_of_both_executors() -> None:
    plan = plan_of(CACHED)
    ps = plan.steps["each"]
    hit_digest = cache_digest("s", "echo", {"x": "1"}, 1)
    index = CacheIndex(now=100.0)
    index.offer(hit_digest, CacheHit("earlier-run", {"content": [{"type": "text", "text": "one"}]}, at=99.0))
    emitted: list[AnyEvent] = []
    machine = StepMachine(plan, folded([]), emitted.append, inputs={}, env={}, cache=index)
    hit = machine.call_or_reuse(ps, 0, "1", "1", {"x": "1"})
    assert isinstance(hit, Ended) and hit.reused and hit.entry is None  # (no template reads the step)
    miss = machine.call_or_reuse(ps, 1, "2", "2", {"x": "2"})
    assert miss == Call(cache_digest("s", "echo", {"x": "2"}, 2))
    broken = machine.call_or_reuse(ps, 2, "c", "c", {"x": "c"})
    assert isinstance(broken, Ended) and not broken.reused and broken.entry is not None
    assert broken.entry["status"] == "failed"
    reused, failed = emitted
    assert isinstance(reused, ItemSucceeded) and (reused.reused_from, reused.cache) == ("earlier-run", hit_digest)
    assert isinstance(failed, ItemFailed) and failed.kind is FailureKind.TEMPLATE_ERROR and failed.item == "c"
    plain = StepMachine(plan_of(FAN.replace("KEY", "")), folded([]), emitted.append, inputs={}, env={})
    assert plain.call_or_reuse(plan_of(FAN.replace("KEY", "")).steps["each"], 0, "a", "a", {"x": "a"}) == Call(None)
