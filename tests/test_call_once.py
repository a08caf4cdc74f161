"""``mcp-run call``'s one call (:func:`runner.engine.calls.single.call_once`) on scripted fake servers and the
virtual clock: checked before sending as a run's item is, made as a task by the run's rule, with the task's
status changes heard as a run journals them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from runner._trio import single_error
from runner.engine.calls.single import CallOptions, TaskNotCollected, call_once, exit_code_of
from runner.engine.core.events import TaskUpdated, task_words
from runner.errors import CallTimeout, HTTPStatusError, InvalidCall, JsonRpcError, NotDelivered, ServerError
from runner.exitcodes import ExitCode
from runner.session import Session, SessionOptions, open_session
from runner.testing.memory import memory_transport_pair
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.fakes.tasks import FakeTasks

SUM_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


@asynccontextmanager
async def serving(tasks: FakeTasks | None = None) -> AsyncIterator[tuple[Session, FakeServer]]:
    with single_error():
        async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
            server = FakeServer(end, tasks=tasks)

            async def research(call: FakeCall) -> dict[str, Any]:
                assert call.task is not None
                for stage in ("Gathering sources...", "Analyzing content..."):
                    call.task.set("working", stage)
                    await trio.sleep(1.5)
                return text_result(f"report on {call.arguments['topic']}")

            async def get_sum(call: FakeCall) -> dict[str, Any]:
                return text_result(str(call.arguments["a"] + call.arguments["b"]))

            server.tools.update({"simulate-research-query": research, "get-sum": get_sum})
            server.schemas["get-sum"] = SUM_SCHEMA
            nursery.start_soon(server.serve)
            options = SessionOptions(name="server")
            async with open_session(client, options) as session:
                yield session, server
            nursery.cancel_scope.cancel()


def tools_calls(server: FakeServer) -> list[Any]:
    return [m for m in server.received if getattr(m, "method", None) == "tools/call"]


async def test_a_task_only_tool_is_called_as_a_task_and_its_status_heard(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"simulate-research-query": "required"}, poll_interval=1000)
    updates: list[TaskUpdated] = []
    async with serving(tasks) as (session, _server):
        result = await call_once(
            session,
            "everything",
            "simulate-research-query",
            {"topic": "tasks"},
            CallOptions(timeout=60, on_task=updates.append),
        )
    assert result.content[0].text == "report on tasks" and not result.is_error
    assert tasks.augmented == ["simulate-research-query"]
    shown = [task_words(u.status, u.message, u.task_id) for u in updates]
    assert shown[0] == "task task-1 working"  # as created
    assert "task task-1 working: Gathering sources..." in shown and "task task-1 working: Analyzing content..." in shown
    assert updates[-1].status == "completed"


async def test_wrong_arguments_are_refused_and_nothing_is_sent(autojump_clock: trio.abc.Clock) -> None:
    async with serving() as (session, server):
        with pytest.raises(InvalidCall) as caught:
            await call_once(session, "everything", "get-sum", {"a": "x"}, CallOptions())
        assert tools_calls(server) == []
        assert await call_once(session, "everything", "get-sum", {"a": 1, "b": 2}, CallOptions()) is not None
        assert len(tools_calls(server)) == 1
    assert str(caught.value) == (
        "args: missing required argument 'b' (a number); args.a: 'x' is not of type 'number' (refused by the "
        "inputSchema of get-sum; not sent)"
    )


async def test_an_unknown_tool_gets_a_did_you_mean_and_nothing_is_sent(autojump_clock: trio.abc.Clock) -> None:
    async with serving() as (session, server):
        with pytest.raises(InvalidCall, match="server everything has no tool 'get_sum'; did you mean 'get-sum'"):
            await call_once(session, "everything", "get_sum", {"a": 1, "b": 2}, CallOptions())
        assert tools_calls(server) == []


async def test_a_task_that_cannot_be_polled_to_its_end_is_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    tasks = FakeTasks(support={"simulate-research-query": "required"}, poll_interval=1000)
    async with serving(tasks) as (session, server):

        async def go_away() -> None:
            await trio.sleep(0.5)  # after the task was created, before its first poll
            server.end.break_connection()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(go_away)
            with pytest.raises(TaskNotCollected) as caught:
                await call_once(session, "s", "simulate-research-query", {"topic": "t"}, CallOptions(timeout=30))
    assert caught.value.exit_code == ExitCode.OUTCOME_UNKNOWN
    assert "task task-1 may still be running on the server" in str(caught.value)


async def test_an_argument_the_schema_does_not_name_is_warned_about_as_plan_check_notes_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    warnings: list[str] = []
    async with serving() as (session, server):
        server.schemas["echo"] = {"type": "object", "properties": {"message": {"type": "string"}}}
        server.tools["echo"] = _echo
        await call_once(session, "everything", "echo", {"mesage": "hi"}, CallOptions(on_warning=warnings.append))
        assert len(tools_calls(server)) == 1  # sent: the schema lets it through
    assert warnings == ["everything: args.mesage is not an argument of echo; did you mean 'message'?"]


async def _echo(call: FakeCall) -> dict[str, Any]:
    return text_result(str(call.arguments))


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (HTTPStatusError("refused", status_code=400), ExitCode.PROTOCOL),  # the server's answer to the call
        (NotDelivered("not sent"), ExitCode.UNREACHABLE),
        (CallTimeout("no answer"), ExitCode.OUTCOME_UNKNOWN),
        (JsonRpcError(-32602, "bad"), ExitCode.PROTOCOL),
    ],
)
def test_call_exits_as_a_run_whose_one_item_failed_so(error: ServerError, code: ExitCode) -> None:
    assert exit_code_of(error) == code
