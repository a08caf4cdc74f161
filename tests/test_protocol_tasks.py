"""The pure rules of tasks: parsing what a server says about a task, when to ask for one, how often to poll;
and how the journal folds a task's records."""

from __future__ import annotations

from typing import Any

import pytest

from runner.engine.core.vocabulary import ItemStatus
from runner.errors import MalformedMessage
from runner.protocol.tasks import (
    Task,
    TaskStatus,
    is_task_result,
    parse_task,
    poll_delay,
    server_takes_tasks,
    wants_task,
)
from tests.support import folded

TASKS = {"tasks": {"requests": {"tools": {"call": {}}}}}


def test_a_task_is_parsed_with_its_optional_fields() -> None:
    task = parse_task(
        {"taskId": "t", "status": "input_required", "statusMessage": "m", "ttl": 60000, "pollInterval": 250.0}
    )
    assert task == Task("t", TaskStatus.INPUT_REQUIRED, "m", None, None, 60000, 250)
    assert not task.status.terminal and TaskStatus.CANCELLED.terminal
    assert parse_task({"taskId": "t", "status": "working", "ttl": None}).ttl_ms is None


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ([], "must be an object"),
        ({"status": "working"}, "'taskId'"),
        ({"taskId": "", "status": "working"}, "'taskId'"),
        ({"taskId": "t", "status": "sleeping"}, "unknown status 'sleeping'"),
        ({"taskId": "t"}, "unknown status None"),
        ({"taskId": "t", "status": "working", "ttl": -1}, "'ttl' must be a non-negative number"),
        ({"taskId": "t", "status": "working", "pollInterval": True}, "'pollInterval'"),
        ({"taskId": "t", "status": "working", "pollInterval": float("nan")}, "'pollInterval'"),
        ({"taskId": "t", "status": "working", "statusMessage": 3}, "'statusMessage' must be a string"),
    ],
)
def test_a_bad_task_is_refused_saying_what_is_wrong(raw: Any, says: str) -> None:
    with pytest.raises(MalformedMessage, match="tasks/get: .*" + says.replace("(", r"\(")):
        parse_task(raw)


def test_a_create_task_result_is_told_from_a_plain_result() -> None:
    assert is_task_result({"task": {"taskId": "t", "status": "working"}})
    assert not is_task_result({"content": [], "task": {}})
    assert not is_task_result({"content": []})


@pytest.mark.parametrize(
    ("capabilities", "support", "mode", "asked"),
    [
        (TASKS, "required", "auto", True),
        (TASKS, "required", "off", True),  # a required tool cannot be called otherwise
        (TASKS, "optional", "auto", True),
        (TASKS, "optional", "off", False),
        (TASKS, "forbidden", "auto", False),
        (TASKS, "something-new", "auto", False),
        ({}, "required", "auto", False),
        ({"tasks": {}}, "required", "auto", False),
        ({"tasks": {"requests": {"tools": {}}}}, "optional", "auto", False),
        ({"tasks": {"requests": {"tools": {"call": True}}}}, "optional", "auto", False),
    ],
)
def test_when_a_task_is_asked_for(capabilities: dict[str, Any], support: str, mode: Any, asked: bool) -> None:
    assert wants_task(capabilities, support, mode) is asked
    assert server_takes_tasks(capabilities) is (capabilities is TASKS)


@pytest.mark.parametrize(("interval", "delay"), [(None, 1.0), (0, 0.05), (10, 0.05), (1500, 1.5), (10**9, 30.0)])
def test_the_poll_delay_is_the_servers_within_bounds(interval: int | None, delay: float) -> None:
    assert poll_delay(Task("t", TaskStatus.WORKING, poll_interval_ms=interval)) == delay


def test_a_journaled_task_makes_its_item_collectable_until_it_has_an_answer() -> None:
    dispatched = {"type": "item_dispatched", "step": "s", "item": "a"}
    created = {"type": "task_created", "step": "s", "item": "a", "task_id": "t9", "ttl": 1000}
    state = folded([dispatched, created])
    item = state.item("s", "a")
    assert item is not None and item.collectable and item.task_id == "t9"
    assert item.status is ItemStatus.DISPATCHED  # in flight, or (once its process is gone) to collect
    status = {"type": "task_status", "step": "s", "item": "a", "task_id": "t9", "status": "working", "message": "hm"}
    state = folded([dispatched, created, status])
    assert state.steps["s"].calls["a"].message == "task working: hm"
    for end in (
        {"type": "item_succeeded", "step": "s", "item": "a"},
        {"type": "item_failed", "step": "s", "item": "a", "kind": "outcome-unknown", "error": "lost"},
        dispatched,  # a new attempt: the old task no longer says anything
    ):
        item = folded([dispatched, created, end]).item("s", "a")
        assert item is not None and not item.collectable and item.task_id is None
