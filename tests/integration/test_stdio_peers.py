"""mcp-run's session over stdio against real servers written by others: the official SDK's server and
the reference server-everything. Real pipes, so the real clock, each test bounded by ``trio.fail_after``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from runner._trio import single_error
from runner.connect import StdioTarget, open_target
from runner.errors import JsonRpcError
from runner.protocol.mcp import LogMessage, Progress
from runner.session import Session, SessionOptions
from tests.integration.peers import SDK_SERVER, everything_command, require_peers

pytestmark = pytest.mark.integration


@asynccontextmanager
async def sdk_session(*extra: str, **options: Any) -> AsyncIterator[Session]:
    target = StdioTarget(command=[sys.executable, str(SDK_SERVER), "stdio", *extra])
    with single_error():
        async with open_target(target, SessionOptions(name="sdk", **options)) as session:
            yield session


async def test_sdk_server_lists_tools() -> None:
    with trio.fail_after(30):
        async with sdk_session() as session:
            tools = {t.name: t for t in await session.list_tools()}
    assert {"echo", "add", "slow", "fail", "structured", "count"} <= set(tools)
    assert tools["echo"].annotations.read_only is True
    assert session.server_info.get("name")


async def test_sdk_server_many_concurrent_calls_on_one_session() -> None:
    results: dict[int, str] = {}
    with trio.fail_after(60):
        async with sdk_session() as session:

            async def one(i: int) -> None:
                result = await session.call_tool("echo", {"text": f"message {i}"})
                assert not result.is_error
                results[i] = result.text

            async with trio.open_nursery() as nursery:
                for i in range(64):
                    nursery.start_soon(one, i)
    assert results == {i: f"message {i}" for i in range(64)}


async def test_sdk_server_progress_and_logs_attributed() -> None:
    progress: dict[str, list[Progress]] = {"a": [], "b": []}
    logs: list[LogMessage] = []
    with trio.fail_after(60):
        async with sdk_session(on_log=lambda m, _rid: logs.append(m)) as session, trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: session.call_tool("slow", {"steps": 3, "delay": 0.01}, on_progress=progress["a"].append)
            )
            nursery.start_soon(
                lambda: session.call_tool("slow", {"steps": 6, "delay": 0.01}, on_progress=progress["b"].append)
            )
    assert [p.progress for p in progress["a"]] == [1, 2, 3]
    assert [p.progress for p in progress["b"]] == [1, 2, 3, 4, 5, 6]
    assert progress["b"][0].total == 6
    assert sum(1 for m in logs if "slow step" in str(m.data)) == 9


async def test_sdk_server_tool_error_and_protocol_error() -> None:
    with trio.fail_after(30):
        async with sdk_session() as session:
            result = await session.call_tool("fail", {"message": "deliberate"})
            assert result.is_error and "deliberate" in result.text
            with pytest.raises(JsonRpcError) as info:
                await session.request("no/such/method", {})
    assert info.value.code == -32601


async def test_sdk_server_structured_content() -> None:
    with trio.fail_after(30):
        async with sdk_session() as session:
            result = await session.call_tool("structured", {})
    assert result.structured_content is not None and not result.is_error


# -- server-everything --------------------------------------------------------------------------------


@asynccontextmanager
async def everything_session(**options: Any) -> AsyncIterator[Session]:
    command = everything_command("stdio")
    if command is None:
        message = "server-everything is not installed: run scripts/setup.sh"
        if require_peers():
            pytest.fail(message)
        pytest.skip(message)
    with single_error():
        async with open_target(StdioTarget(command=command), SessionOptions(name="everything", **options)) as s:
            yield s


async def test_everything_echo_and_structured() -> None:
    with trio.fail_after(60):
        async with everything_session() as session:
            names = {t.name for t in await session.list_tools()}
            assert {"echo", "get-structured-content", "trigger-long-running-operation"} <= names
            echo = await session.call_tool("echo", {"message": "hello everything"})
            assert "hello everything" in echo.text
            weather = await session.call_tool("get-structured-content", {"location": "New York"})
    assert weather.structured_content is not None
    assert "temperature" in weather.structured_content


async def test_everything_long_running_operation_reports_progress() -> None:
    seen: list[Progress] = []
    with trio.fail_after(60):
        async with everything_session() as session:
            result = await session.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=seen.append
            )
    assert not result.is_error
    assert [p.progress for p in seen] == [1, 2, 3, 4]
    assert all(p.total == 4 for p in seen)


def test_peer_paths_exist() -> None:
    assert Path(SDK_SERVER).is_file()
