"""Tasks of 2026-07-28 (the ``io.modelcontextprotocol/tasks`` extension): the pure parsing and mapping, and a
:class:`~runner.engine.calls.task.TaskCall` speaking it (``TASKS_2026``) to a scripted server, on the virtual
clock. The 2026 session itself (``server/discover``, ``_meta`` on every request) is not this module's: the
wire is chosen explicitly here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import pytest
import trio

from runner._trio import single_error
from runner.engine.calls.task import TaskCall, TaskLost, TaskSite, TaskUncollected
from runner.engine.core.events import encode
from runner.engine.journal.writer import EventLog
from runner.errors import JsonRpcError, MalformedMessage, McpRunError
from runner.protocol.tasks import Task, TaskStatus
from runner.protocol.tasks2026 import (
    CLIENT_CAPABILITIES_META,
    EXTENSION,
    declare,
    is_task_result,
    new_input_requests,
    outcome,
    parse_detailed_task,
    routing_name,
    server_takes_tasks,
    update_params,
)
from runner.session import AnswerPolicy, Session, SessionOptions, open_session
from runner.session.answers import make_policy
from runner.session.tasks2026 import TASKS_2026
from runner.testing.memory import memory_transport_pair
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.fakes.tasks import FakeTasks

SEED = {
    "resultType": "task",
    "taskId": "786512e2",
    "status": "working",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:40:00Z",
    "ttlMs": 60000,
    "pollIntervalMs": 5000,
}


# -- the pure part ------------------------------------------------------------------------------------------


def test_the_extension_is_declared_beside_other_capabilities() -> None:
    mine = {"extensions": {"other/ext": {"x": 1}}, "elicitation": {}}
    assert declare(mine) == {"extensions": {"other/ext": {"x": 1}, EXTENSION: {}}, "elicitation": {}}
    assert mine == {"extensions": {"other/ext": {"x": 1}}, "elicitation": {}}  # not changed
    assert declare({}) == {"extensions": {EXTENSION: {}}}
    assert server_takes_tasks({"extensions": {EXTENSION: {}}})
    assert not server_takes_tasks({"tasks": {"requests": {"tools": {"call": {}}}}})  # the 2025 capability
    assert not server_takes_tasks({"extensions": {EXTENSION: True}})


def test_a_create_task_result_is_told_by_its_result_type() -> None:
    assert is_task_result(SEED)
    assert not is_task_result({"content": []})  # no resultType: complete
    assert not is_task_result({"resultType": "complete", "content": []})
    task = parse_detailed_task(SEED, where="tools/call")
    assert task == Task("786512e2", TaskStatus.WORKING, None, SEED["createdAt"], SEED["lastUpdatedAt"], 60000, 5000)
    assert parse_detailed_task({**SEED, "ttlMs": None}).ttl_ms is None


def test_a_terminal_task_carries_its_outcome() -> None:
    done = parse_detailed_task({**SEED, "status": "completed", "result": text_result("hi", is_error=True)})
    result = outcome(done)
    assert result.is_error and result.text == "hi"  # a tool error completes: it stays a tool error
    failed = parse_detailed_task(
        {**SEED, "status": "failed", "statusMessage": "rate limit", "error": {"code": -32603, "message": "API"}}
    )
    with pytest.raises(JsonRpcError) as caught:
        outcome(failed)
    assert (caught.value.code, caught.value.message) == (-32603, "API")
    with pytest.raises(ValueError, match="working: it has no result"):
        outcome(parse_detailed_task(SEED))
    assert parse_detailed_task({**SEED, "result": {"content": []}}).result is None  # only a completed task's


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({**SEED, "status": "completed"}, "completed but carries no 'result'"),
        ({**SEED, "status": "failed", "error": "x"}, "failed but carries no 'error'"),
        ({**SEED, "status": "input_required", "inputRequests": []}, "'inputRequests' must be an object"),
        ({**SEED, "pollIntervalMs": "soon"}, "'pollInterval' must be a non-negative number"),
        ({**SEED, "status": "paused"}, "unknown status 'paused'"),
        ("task", "must be an object"),
    ],
)
def test_a_bad_task_is_refused_saying_what_is_wrong(raw: Any, says: str) -> None:
    with pytest.raises(MalformedMessage, match=says):
        parse_detailed_task(raw)


def test_questions_are_new_once_and_answered_by_key() -> None:
    ask = {"name": {"method": "elicitation/create", "params": {"message": "name?"}}}
    task = parse_detailed_task({**SEED, "status": "input_required", "inputRequests": ask})
    seen: set[str] = set()
    assert new_input_requests(task, seen) == ask
    assert new_input_requests(task, seen) == {}  # polled again before it was answered: the same question
    answers = {"name": {"action": "decline"}}
    assert update_params("786512e2", answers) == {"taskId": "786512e2", "inputResponses": answers}


def test_task_requests_are_routed_by_their_task_id() -> None:
    assert routing_name("tasks/get", {"taskId": "t1"}) == "t1"
    assert routing_name("tasks/cancel", {"taskId": "t1"}) == "t1"
    assert routing_name("tools/call", {"taskId": "t1"}) is None
    assert routing_name("tasks/update", {"taskId": 5}) is None


# -- a task call speaking it --------------------------------------------------------------------------------


@asynccontextmanager
async def serving(
    tasks: FakeTasks, setup: Any = None, answers: AnswerPolicy | None = None
) -> AsyncIterator[tuple[Session, FakeServer]]:
    with single_error():
        async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
            server = FakeServer(end, tasks=tasks)

            async def slow(call: FakeCall) -> dict[str, Any]:
                await trio.sleep(float(call.arguments.get("seconds", 3)))
                return text_result("slow done")

            server.tools["slow"] = slow
            if setup is not None:
                setup(server)
            nursery.start_soon(server.serve)
            options = SessionOptions(name="modern", tasks_extension=True, answers=answers or AnswerPolicy())
            async with open_session(client, options) as session:
                yield session, server
            nursery.cancel_scope.cancel()


def task_call(events: list[dict[str, Any]], *, timeout: float | None = None) -> TaskCall:
    log = EventLog(None)
    log.subscribe(lambda entry: events.append(encode(entry)))

    async def no_next(old: Session, error: McpRunError) -> Session:
        raise error

    site = TaskSite(log=log, next_session=no_next, wire=TASKS_2026)
    return TaskCall(site, ("research", "", None), timeout=timeout)


async def dispatched(rid: Any, token: Any) -> None:
    pass


async def test_a_2026_task_is_polled_and_its_result_read_from_tasks_get(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "server decides"}, era="2026", poll_interval=1000)
    events: list[dict[str, Any]] = []
    async with serving(tasks) as (session, server):
        start = trio.current_time()
        result = await task_call(events).start(
            session,
            "slow",
            {"seconds": 2.5},
            idle_timeout=None,
            on_progress=None,
            before_send=dispatched,
            on_resumed=None,
        )
    assert result.text == "slow done"
    call = next(m for m in server.received if getattr(m, "method", None) == "tools/call")
    assert call.params["_meta"][CLIENT_CAPABILITIES_META] == {"extensions": {EXTENSION: {}}}
    assert "task" not in call.params  # the server decides; the client does not ask
    methods = [getattr(m, "method", None) for m in server.received]
    assert "tasks/result" not in methods
    assert [round(t - start, 3) for t, _ in tasks.gets] == [1.0, 2.0, 3.0]
    (created,) = [e for e in events if e["type"] == "task_created"]
    assert (created["task_id"], created["ttl"], created["poll_interval"]) == ("task-1", 3_600_000, 1000)


async def test_a_2026_server_may_answer_without_a_task(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={}, era="2026")  # the server decides against a task
    events: list[dict[str, Any]] = []
    async with serving(tasks) as (session, _server):
        result = await task_call(events).start(
            session, "slow", {}, idle_timeout=None, on_progress=None, before_send=dispatched, on_resumed=None
        )
    assert result.text == "slow done" and events == []


async def test_a_failed_2026_task_raises_the_error_it_carries(autojump_clock: trio.abc.Clock) -> None:
    from runner.protocol.jsonrpc import ErrorResponse

    def setup(server: FakeServer) -> None:
        async def broken(call: FakeCall) -> ErrorResponse:
            await trio.sleep(1)
            return ErrorResponse(call.request.id, -32602, "the tool refused its arguments")

        server.tools["broken"] = broken

    tasks = FakeTasks(support={"broken": "yes"}, era="2026")
    async with serving(tasks, setup) as (session, _server):
        with pytest.raises(JsonRpcError) as caught:  # not "task lost", although its code is -32602
            await task_call([]).start(
                session, "broken", {}, idle_timeout=None, on_progress=None, before_send=dispatched, on_resumed=None
            )
    assert caught.value.code == -32602 and "refused its arguments" in caught.value.message


async def test_a_2026_task_is_collected_by_id_or_lost(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "yes"}, era="2026")
    async with serving(tasks) as (session, _server):
        await task_call([]).start(
            session,
            "slow",
            {"seconds": 1},
            idle_timeout=None,
            on_progress=None,
            before_send=dispatched,
            on_resumed=None,
        )
        again = await task_call([]).collect(session, "task-1")  # as a resume does
        assert again.text == "slow done"
        with pytest.raises(TaskLost, match="no longer knows task nope"):
            await task_call([]).collect(session, "nope")


async def test_a_2026_timeout_sends_tasks_cancel_with_the_extension_declared(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "yes"}, era="2026")
    async with serving(tasks) as (session, server):
        with pytest.raises(McpRunError, match=r"task task-1 got no result \(4 s timeout\); tasks/cancel sent"):
            await task_call([], timeout=4).start(
                session,
                "slow",
                {"seconds": 100},
                idle_timeout=None,
                on_progress=None,
                before_send=dispatched,
                on_resumed=None,
            )
    assert tasks.cancels == ["task-1"]
    cancel = next(m for m in server.received if getattr(m, "method", None) == "tasks/cancel")
    assert EXTENSION in cancel.params["_meta"][CLIENT_CAPABILITIES_META]["extensions"]


async def test_a_lost_connection_while_polling_leaves_the_task_to_a_resume(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"slow": "yes"}, era="2026")
    events: list[dict[str, Any]] = []
    call = task_call(events)
    async with serving(tasks) as (session, server):

        async def cut() -> None:
            await trio.sleep(2.5)
            server.end.break_connection()  # the connection dies

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cut)
            with pytest.raises(TaskUncollected, match="a resume collects its result"):
                await call.start(
                    session,
                    "slow",
                    {"seconds": 100},
                    idle_timeout=None,
                    on_progress=None,
                    before_send=dispatched,
                    on_resumed=None,
                )
    assert tasks.cancels == []  # not cancelled: the task goes on, and is collected later
    assert [e["type"] for e in events].count("task_created") == 1


CONFIRM = {
    "method": "elicitation/create",
    "params": {
        "message": "Go on?",
        "requestedSchema": {
            "type": "object",
            "properties": {"ok": {"type": "boolean", "default": True}},
            "required": ["ok"],
        },
    },
}


def asking(questions: dict[str, Any]) -> Any:
    def setup(server: FakeServer) -> None:
        async def confirm(call: FakeCall) -> dict[str, Any]:
            assert call.task is not None
            answers = await call.task.ask(questions)
            return text_result(json.dumps(answers, sort_keys=True))

        server.tools["confirm"] = confirm

    return setup


async def start(session: Session, events: list[dict[str, Any]]) -> Any:
    return await task_call(events).start(
        session, "confirm", {}, idle_timeout=None, on_progress=None, before_send=dispatched, on_resumed=None
    )


ACCEPTED: Final = {"action": "accept", "content": {"ok": True}}


@pytest.mark.parametrize(("policy", "answer"), [("defaults", ACCEPTED), (None, {"action": "decline"})])
async def test_a_2026_task_that_asks_is_answered_by_the_policy_with_tasks_update(
    autojump_clock: trio.abc.Clock, policy: str | None, answer: dict[str, Any]
) -> None:
    tasks = FakeTasks(support={"confirm": "server decides"}, era="2026", poll_interval=1000)
    events: list[dict[str, Any]] = []
    async with serving(tasks, asking({"q1": CONFIRM}), make_policy(policy)) as (session, server):
        result = await start(session, events)
    assert json.loads(result.text) == {"q1": answer}
    updates = [m for m in server.received if getattr(m, "method", None) == "tasks/update"]
    assert len(updates) == 1  # polled again while still asking: each question answered once
    assert tasks.executions["confirm"] == 1
    assert [e["status"] for e in events if e["type"] == "task_status"][-1] == "completed"


async def test_a_2026_task_asking_what_mcp_run_cannot_give_is_cancelled_and_fails(
    autojump_clock: trio.abc.Clock,
) -> None:
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    tasks = FakeTasks(support={"confirm": "server decides"}, era="2026", poll_interval=1000)
    async with serving(tasks, asking({"s": sampling})) as (session, _server):
        with pytest.raises(McpRunError, match="cannot give"):
            await start(session, [])
    assert tasks.cancels == ["task-1"]
