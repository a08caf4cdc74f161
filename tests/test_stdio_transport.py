"""The stdio transport against real child processes (the fakes in tests/fakes/).

These wait on real pipes, so they run on the real clock, each under ``trio.fail_after``; no test sleeps to wait
for a server: fakes say ``ready`` on stdout when a test must wait for them.
"""

from __future__ import annotations

import os
import re
import signal
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from runner.errors import ConnectFailed, FrameTooLarge, McpRunError, NotDelivered, TransportError
from runner.protocol.jsonrpc import InvalidMessage, Notification, Request, Response
from runner.transports import stdio
from runner.transports.base import Transport
from runner.transports.stdio import StdioParams, StdioTransport, open_stdio_transport
from tests.fakes import fake_command

LIMIT = 10  # seconds: a guard against hangs, far above what any test needs


def params(name: str, *args: str, **kwargs: object) -> StdioParams:
    return StdioParams(fake_command(name, *args), **kwargs)  # type: ignore[arg-type]


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped is dead)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return data[data.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


async def test_round_trip_of_many_concurrent_requests() -> None:
    received: list[int | str] = []
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo")) as transport:
            checked: Transport = transport  # it implements the interface

            async def sender(first: int) -> None:
                for i in range(first, 200, 20):
                    await checked.send(Request(i, "echo", {"n": i}))

            async with trio.open_nursery() as nursery:
                for first in range(20):
                    nursery.start_soon(sender, first)
                for _ in range(200):
                    event = await transport.receive()
                    assert isinstance(event, Response)
                    assert event.result == {"params": {"n": event.id}}
                    received.append(event.id)
    assert sorted(received) == list(range(200))  # type: ignore[type-var]


async def test_a_message_larger_than_the_pipe_goes_both_ways() -> None:
    big = "x" * (1024 * 1024)
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo")) as transport:
            await transport.send(Request(1, "echo", {"big": big}))
            await transport.send(Request(2, "echo"))
            assert await transport.receive() == Response(1, {"params": {"big": big}})
            assert await transport.receive() == Response(2, {"params": None})


async def test_messages_cut_anywhere_are_reassembled() -> None:
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_chunked")) as transport:
            assert await transport.receive() == Notification("a")
            await transport.send(Notification("next"))
            assert await transport.receive() == Notification("b")
            await transport.send(Notification("next"))
            assert await transport.receive() == Response(1, {"text": "café"})
            assert await transport.receive() == Notification("c")
            assert await transport.receive() == Notification("d")
            await transport.send(Notification("next"))
            assert await transport.receive() == Response("two", {})
            with pytest.raises(TransportError, match="server exited with code 0"):
                await transport.receive()
            assert transport.stray_lines == 0


async def test_a_line_that_is_not_json_is_reported_and_counted() -> None:
    out = 'Server starting on stdio...\n{"jsonrpc":"2.0","method":"hello"}\n'
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_scripted", "--stdout", out, "--wait")) as transport:
            event = await transport.receive()
            assert isinstance(event, InvalidMessage)
            assert event.raw == b"Server starting on stdio..."
            assert "not JSON" in event.error
            assert transport.stray_lines == 1
            assert await transport.receive() == Notification("hello")


async def test_an_unterminated_last_line_is_delivered_before_the_exit() -> None:
    out = '{"jsonrpc":"2.0","method":"bye"}'
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_scripted", "--stdout", out, "--code", "0")) as transport:
            assert await transport.receive() == Notification("bye")
            with pytest.raises(TransportError, match="exited with code 0"):
                await transport.receive()


async def test_a_slow_consumer_loses_nothing_when_the_server_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "EXIT_GRACE", 0.05)
    out = "".join(f'{{"jsonrpc":"2.0","method":"n{i}"}}\n' for i in range(500))  # more than the event buffer
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_scripted", "--stdout", out)) as transport:
            while transport.returncode is None:  # noqa: ASYNC110 - the exit is what this test is about
                await trio.sleep(0.01)
            await trio.sleep(0.2)  # a consumer slower than EXIT_GRACE: most messages are still in the pipe
            for i in range(500):
                assert await transport.receive() == Notification(f"n{i}")
            with pytest.raises(TransportError) as exc_info:
                await transport.receive()
            assert str(exc_info.value) == "server exited with code 0"


async def test_an_oversized_line_fails_the_connection() -> None:
    out = "x" * 5000 + '\n{"jsonrpc":"2.0","method":"after"}\n'
    p = params("stdio_scripted", "--stdout", out, "--wait", max_message_size=1000)
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(p) as transport:
            with pytest.raises(FrameTooLarge, match="1,000-byte cap") as first:
                await transport.receive()
            with pytest.raises(FrameTooLarge) as again:
                await transport.receive()
            assert again.value is first.value
            with pytest.raises(NotDelivered, match="connection is closed: a message from the server exceeded"):
                await transport.send(Notification("more"))
        assert transport.returncode == 0  # the server, still reading, exited when its stdin closed


async def test_a_server_that_exits_reports_its_code_and_stderr() -> None:
    p = params("stdio_scripted", "--stderr", "error: MISSING_API_KEY is not set", "--code", "3")
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(p) as transport:
            with pytest.raises(TransportError, match="server exited with code 3") as exc_info:
                await transport.receive()
            error = exc_info.value
            assert type(error) is TransportError
            assert error.stderr == "error: MISSING_API_KEY is not set 0\n"
            assert "MISSING_API_KEY is not set" in str(error)
            with pytest.raises(TransportError) as again:
                await transport.receive()
            assert again.value is error
            with pytest.raises(NotDelivered, match="connection is closed: server exited with code 3") as sent:
                await transport.send(Request(1, "ping"))
            assert sent.value.stderr == error.stderr
            assert sent.value.__cause__ is error


async def test_a_server_killed_by_a_signal_says_so() -> None:
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_stubborn", "--silent")) as transport:
            assert await transport.receive() == Notification("ready")
            os.kill(transport.pid, signal.SIGKILL)
            with pytest.raises(TransportError, match=r"exited with code -9 \(killed by SIGKILL\)"):
                await transport.receive()


async def test_a_server_that_closes_stdout_but_runs_is_disconnected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "EXIT_GRACE", 0.05)
    command = [*fake_command("stdio_echo")[:1], "-c", "import os, time\nos.close(1)\ntime.sleep(60)\n"]
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(StdioParams(command, shutdown_timeout=0.2)) as transport:
            with pytest.raises(TransportError, match=r"^server closed its stdout$"):
                await transport.receive()
    assert transport.returncode == -signal.SIGTERM


async def test_a_failed_write_is_not_delivered() -> None:
    # A server that closed its stdin but still runs: the write itself fails (EPIPE).
    script = 'import os, sys, time\nos.close(0)\nprint(\'{"jsonrpc":"2.0","method":"ready"}\', flush=True)\n'
    script += "time.sleep(60)\n"
    p = StdioParams([*fake_command("stdio_echo")[:1], "-c", script], shutdown_timeout=0.1)
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(p) as transport:
            assert await transport.receive() == Notification("ready")
            with pytest.raises(NotDelivered, match="cannot write to the server: Broken pipe") as exc_info:
                await transport.send(Request(1, "ping"))
            assert isinstance(exc_info.value.__cause__, BrokenPipeError)
            assert exc_info.value.stderr is not None


async def test_a_write_that_fails_as_the_server_dies_waits_for_its_whole_stderr() -> None:
    # The write fails (EPIPE) while the server still runs; its stderr comes only later, as it dies. The error
    # waits for the exit and the end of stderr, and comes after the reader has seen the end of stdout.
    received: list[object] = []

    async def read_all(transport: StdioTransport) -> None:
        while True:
            try:
                received.append(await transport.receive())
            except TransportError as exc:
                received.append(exc)
                return

    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_dying", "--lines", "3")) as transport:
            assert await transport.receive() == Notification("ready")  # its stdin is closed from now on
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_all, transport)

                async def send() -> None:
                    with pytest.raises(NotDelivered) as exc_info:
                        await transport.send(Request(1, "initialize"))
                    assert str(exc_info.value) == (
                        "cannot write to the server: server exited with code 1\n"
                        "  server stderr (last lines):\n    dying 0\n    dying 1\n    dying 2"
                    )
                    assert isinstance(received[-1], TransportError)  # the reader heard of the end first

                nursery.start_soon(send)
                await trio.testing.wait_all_tasks_blocked()  # the write failed; the send waits for the death
                os.kill(transport.pid, signal.SIGUSR1)


async def test_a_send_cancelled_half_way_never_tears_a_line() -> None:
    big = "y" * (512 * 1024)  # far more than a pipe holds: the write blocks part-way
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo", "--hold")) as transport:
            assert await transport.receive() == Notification("ready")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(transport.send, Request(1, "echo", {"big": big}))
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()  # cancelled with part of the line written
            os.kill(transport.pid, signal.SIGUSR1)  # the server starts reading
            await transport.send(Request(2, "echo"))
            # the cancelled line was finished first: the server read two whole lines
            assert await transport.receive() == Response(1, {"params": {"big": big}})
            assert await transport.receive() == Response(2, {"params": None})


async def test_a_send_cancelled_while_queued_is_withdrawn() -> None:
    big = "y" * (512 * 1024)  # the writer blocks on it part-way; the next line waits in the queue
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo", "--hold")) as transport:
            assert await transport.receive() == Notification("ready")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(transport.send, Request(1, "echo", {"big": big}))
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(transport.send, Request(2, "echo"))
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()  # both sends: the first is part-way, the second still queued
            os.kill(transport.pid, signal.SIGUSR1)  # the server starts reading
            await transport.send(Request(3, "echo"))
            assert await transport.receive() == Response(1, {"params": {"big": big}})
            assert await transport.receive() == Response(3, {"params": None})  # 2 never went out


async def test_queued_lines_are_told_how_their_write_ended_and_can_be_withdrawn_until_taken() -> None:
    big = "y" * (512 * 1024)  # the writer blocks on it part-way; the lines queued after it wait
    told: dict[int, object] = {}

    def tell(rid: int) -> Callable[[NotDelivered | None], None]:
        return lambda failure: told.__setitem__(rid, failure)

    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo", "--hold")) as transport:
            assert await transport.receive() == Notification("ready")
            withdraw_1 = transport.queue(Request(1, "echo", {"big": big}), tell(1))
            await trio.testing.wait_all_tasks_blocked()  # the writer took line 1 and blocks on the full pipe
            withdraw_2 = transport.queue(Request(2, "echo"), tell(2))
            transport.queue(Request(3, "echo"), tell(3))
            assert withdraw_1() is False  # taken: it goes out whole
            assert withdraw_2() is True  # still queued: taken back, never written, never told
            assert told == {}
            os.kill(transport.pid, signal.SIGUSR1)  # the server starts reading
            assert await transport.receive() == Response(1, {"params": {"big": big}})
            assert await transport.receive() == Response(3, {"params": None})
            assert told == {1: None, 3: None}


class _Gate:
    """A gate a test opens (or fails) by hand."""

    def __init__(self) -> None:
        self.opened = trio.Event()
        self.error: McpRunError | None = None

    def passed(self) -> bool:
        return self.opened.is_set() and self.error is None

    async def wait(self) -> None:
        await self.opened.wait()
        if self.error is not None:
            raise self.error


async def test_a_gated_line_waits_for_its_gate_and_stays_withdrawable_meanwhile() -> None:
    """A dispatch record not yet durable holds its request (and its batch, and what is queued after it) back; a
    line of that batch withdrawn meanwhile never goes out, and lines queued meanwhile form the next batch, so a
    line already durable never waits for a later one's gate."""
    told: dict[int, object] = {}

    def tell(rid: int) -> Callable[[NotDelivered | None], None]:
        return lambda failure: told.__setitem__(rid, failure)

    gate, later = _Gate(), _Gate()
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo")) as transport:
            transport.queue(Request(1, "echo"), tell(1), gate)
            withdraw_2 = transport.queue(Request(2, "echo"), tell(2), gate)  # the same batch
            await trio.testing.wait_all_tasks_blocked()  # the writer took it and waits for the gate
            transport.queue(Request(3, "echo"), tell(3), later)  # the next batch
            await trio.testing.wait_all_tasks_blocked()
            assert told == {}  # nothing written yet
            assert withdraw_2() is True
            gate.opened.set()
            assert await transport.receive() == Response(1, {"params": None})  # 3's gate is still closed
            assert told == {1: None}
            later.opened.set()
            assert await transport.receive() == Response(3, {"params": None})
            assert told == {1: None, 3: None}


async def test_a_gate_that_cannot_open_fails_its_batch_as_not_delivered() -> None:
    told: list[NotDelivered | None] = []
    gate = _Gate()
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo")) as transport:
            transport.queue(Request(1, "echo"), told.append, gate)
            await trio.testing.wait_all_tasks_blocked()
            gate.error = McpRunError("cannot write the journal: No space left on device")
            gate.opened.set()
            await transport.send(Request(2, "echo"))  # the connection goes on: the next batch is written
            assert await transport.receive() == Response(2, {"params": None})  # 1 never went out
    assert len(told) == 1 and isinstance(told[0], NotDelivered)
    assert "not written: cannot write the journal: No space left on device" in str(told[0])


async def test_a_queued_line_whose_write_fails_is_told_not_delivered() -> None:
    script = 'import os, sys, time\nos.close(0)\nprint(\'{"jsonrpc":"2.0","method":"ready"}\', flush=True)\n'
    script += "time.sleep(60)\n"
    p = StdioParams([*fake_command("stdio_echo")[:1], "-c", script], shutdown_timeout=0.1)
    told: list[NotDelivered | None] = []
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(p) as transport:
            assert await transport.receive() == Notification("ready")
            transport.queue(Request(1, "ping"), told.append)
            with pytest.raises(NotDelivered):  # the same write: its end comes after line 1 was told
                await transport.send(Request(2, "ping"))
    assert len(told) == 1 and isinstance(told[0], NotDelivered)
    assert "cannot write to the server: Broken pipe" in str(told[0])


def test_a_line_cut_before_its_newline_only_may_have_reached_the_server() -> None:
    """A failed write that stopped after a message's last byte, before its newline, does not make the message
    "not delivered": a server may read a last line without its newline (at end of input) and act on it. One
    cut inside the message (a JSON prefix, which no server can read as a request) surely did not deliver it."""
    lines = [b'{"id":1}\n', b'{"id":2}\n', b'{"id":3}\n']
    for written, unsent in [(8, [False, True, True]), (7, [True, True, True]), (17, [False, False, True])]:
        batch = stdio._Batch()
        told: list[NotDelivered | None] = []
        batch.lines, batch.told = list(lines), [told.append] * 3
        batch.ends, batch.written = [9, 18, 27], written
        batch.fail("cannot write to the server: Broken pipe", "")
        batch.finish()
        assert [failure is not None for failure in told] == unsent, written


async def test_nothing_is_queued_once_the_transport_has_closed() -> None:
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_echo")) as transport:
            await transport.send(Request(1, "echo"))
            assert await transport.receive() == Response(1, {"params": None})
        with pytest.raises(NotDelivered, match="connection is closed"):
            transport.queue(Request(1, "ping"), lambda failure: None)
        with pytest.raises(NotDelivered, match="connection is closed"):
            await transport.send(Request(2, "ping"))


async def test_a_send_blocked_on_a_full_pipe_fails_when_the_transport_closes() -> None:
    errors: list[NotDelivered] = []

    async def send_big(transport: StdioTransport) -> None:
        with pytest.raises(NotDelivered) as exc_info:
            await transport.send(Request(1, "echo", {"big": "z" * (512 * 1024)}))
        errors.append(exc_info.value)

    p = params("stdio_echo", "--hold", shutdown_timeout=0.2)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery, open_stdio_transport(p) as transport:
            assert await transport.receive() == Notification("ready")
            nursery.start_soon(send_big, transport)
            await trio.testing.wait_all_tasks_blocked()
    assert [str(e) for e in errors] == ["cannot write to the server: the transport is closed"]


async def test_a_command_that_does_not_exist_fails_to_connect() -> None:
    with pytest.raises(
        ConnectFailed, match=r"^cannot start server 'no-such-mcp-server': No such file or directory$"
    ) as e:
        async with open_stdio_transport(StdioParams(["no-such-mcp-server", "--flag"])):
            pass  # pragma: no cover
    assert isinstance(e.value.__cause__, FileNotFoundError)


async def test_a_nul_byte_in_the_command_fails_to_connect() -> None:
    with pytest.raises(ConnectFailed, match=re.escape("cannot start server 'server\\x00': embedded null byte")):
        async with open_stdio_transport(StdioParams(["server\0"])):
            pass  # pragma: no cover


async def test_a_command_that_is_not_executable_fails_to_connect(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(ConnectFailed, match="Permission denied"):
        async with open_stdio_transport(StdioParams([str(script)])):
            pass  # pragma: no cover


async def test_a_missing_working_directory_fails_to_connect(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(ConnectFailed, match=f"working directory '{missing}': No such file or directory"):
        async with open_stdio_transport(params("stdio_echo", cwd=missing)):
            pass  # pragma: no cover


async def test_the_environment_is_allow_listed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCP_RUN_TEST_SECRET", "hunter2")
    monkeypatch.setenv("HOME", "/home/runner")
    p = params("stdio_echo", env={"MCP_RUN_CONFIGURED": "yes", "HOME": "/srv/override"}, cwd=str(tmp_path))
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(p) as transport:
            await transport.send(Request(1, "env"))
            event = await transport.receive()
    assert isinstance(event, Response)
    env = event.result["env"]
    assert "MCP_RUN_TEST_SECRET" not in env
    assert env["MCP_RUN_CONFIGURED"] == "yes"
    assert env["HOME"] == "/srv/override"  # configured variables win
    assert env["PATH"] == os.environ["PATH"]
    assert event.result["cwd"] == str(await trio.Path(tmp_path).resolve())


async def test_a_grandchild_is_killed_on_shutdown(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_spawner", str(pidfile))) as transport:
            ready = await transport.receive()
            assert isinstance(ready, Notification)
            child = int(pidfile.read_text())
            assert ready.params == {"pid": child}
            assert running(child)
    assert transport.returncode == 0
    assert not running(child)


async def test_a_grandchild_holding_stdout_does_not_keep_the_connection_open(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_spawner", str(pidfile), "--exit")) as transport:
            assert isinstance(await transport.receive(), Notification)
            with pytest.raises(TransportError, match=r"exited with code 0 \(its stdout is still held open"):
                await transport.receive()
            assert running(int(pidfile.read_text()))
    assert not running(int(pidfile.read_text()))


async def test_a_server_that_ignores_sigterm_is_killed() -> None:
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_stubborn", shutdown_timeout=0.2)) as transport:
            assert await transport.receive() == Notification("ready")  # SIGTERM is ignored from now on
    assert transport.returncode == -signal.SIGKILL


async def test_a_server_that_never_answers_is_stopped_on_exit() -> None:
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(params("stdio_stubborn", "--silent", shutdown_timeout=0.2)) as transport:
            assert await transport.receive() == Notification("ready")
            await transport.send(Request(1, "tools/list"))
    assert transport.returncode == -signal.SIGTERM


async def test_cancellation_still_stops_the_server() -> None:
    transport: StdioTransport | None = None
    with trio.fail_after(LIMIT), trio.CancelScope() as scope:
        async with open_stdio_transport(params("stdio_echo")) as transport:
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert transport is not None
    assert transport.returncode == 0  # it exited on the end of its stdin, and was reaped


async def test_an_error_in_the_body_comes_out_unwrapped() -> None:
    with trio.fail_after(LIMIT), pytest.raises(KeyError, match="boom"):
        async with open_stdio_transport(params("stdio_echo")):
            raise KeyError("boom")


async def test_the_stderr_tail_is_bounded() -> None:
    p = params("stdio_scripted", "--stderr", "log line", "--count", "1000", "--code", "1", stderr_tail_bytes=100)
    everything = "".join(f"log line {i}\n" for i in range(1000))
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(p) as transport:
            with pytest.raises(TransportError, match="exited with code 1") as exc_info:
                await transport.receive()
            # the last 100 bytes, from the first whole line: a line cut by the limit is left out
            whole_lines = everything[-100:].partition("\n")[2]
            assert everything[-100:] != whole_lines and everything.endswith(whole_lines)
            assert exc_info.value.stderr == whole_lines
            assert transport.stderr_tail() == whole_lines


async def test_the_stderr_tail_is_redacted_before_it_goes_into_an_error() -> None:
    p = params(
        "stdio_scripted", "--stderr", "token=abcdef", "--count", "3", "--code", "1",
        redact=lambda text: text.replace("abcdef", "***env.T***"),
    )  # fmt: skip
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(p) as transport:
            with pytest.raises(TransportError, match="exited with code 1") as exc_info:
                await transport.receive()
    assert exc_info.value.stderr == "".join(f"token=***env.T*** {i}\n" for i in range(3))
    assert "abcdef" not in str(exc_info.value)


async def test_describe_names_the_command() -> None:
    command = ["sh", "-c", "exec cat >/dev/null", "my server"]
    with trio.fail_after(LIMIT):
        async with open_stdio_transport(StdioParams(command)) as transport:
            assert transport.describe() == "stdio: sh -c 'exec cat >/dev/null' 'my server'"
        async with open_stdio_transport(StdioParams([*command, "x" * 200])) as transport:
            assert transport.describe() == "stdio: sh -c 'exec cat >/dev/null' 'my server' " + "x" * 39 + "…"


def test_params_want_an_argv_list() -> None:
    with pytest.raises(TypeError, match="argv list"):
        StdioParams("python server.py")
    with pytest.raises(ValueError, match="empty"):
        StdioParams([])
    assert StdioParams(["a", "b"]).command == ("a", "b")


# A crashing server's stderr, through the session, every time. These servers are shell scripts: they start and
# die faster than a Python one, which makes the race between our first write and their exit as tight as it gets
# (the write sometimes fails with EPIPE, sometimes goes into the pipe before the server is gone).

CRASH_AT_START = [
    "sh",
    "-c",
    "echo 'Traceback (most recent call last):' >&2; echo 'ImportError: no fastmcp' >&2; exit 3",
]
CRASH_ON_CALL = [
    "sh",
    "-c",
    "read -r init; echo '"
    '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}}'
    "'; read -r initialized; read -r call; echo 'RuntimeError: the tool crashed' >&2; exit 1",
]


async def test_a_server_that_dies_during_initialize_shows_its_stderr_every_time() -> None:
    from runner.session import SessionOptions, open_session

    for _attempt in range(50):
        with trio.fail_after(LIMIT):
            with pytest.raises(ConnectFailed) as exc_info:
                async with (
                    open_stdio_transport(StdioParams(CRASH_AT_START)) as transport,
                    open_session(transport, SessionOptions(name="docs", server_log_level=None)),
                ):
                    pass  # pragma: no cover
        assert str(exc_info.value).splitlines() == [
            "could not initialize: server exited with code 3",
            "  server stderr (last lines):",
            "    Traceback (most recent call last):",
            "    ImportError: no fastmcp",
        ]


async def test_a_server_that_dies_on_a_call_shows_its_stderr_every_time() -> None:
    from runner.errors import OutcomeUnknown
    from runner.session import SessionOptions, open_session

    for _attempt in range(50):
        with trio.fail_after(LIMIT):
            async with (
                open_stdio_transport(StdioParams(CRASH_ON_CALL)) as transport,
                # a scripted server that answers by line number, not by method: pinned to the handshake
                open_session(
                    transport, SessionOptions(name="docs", server_log_level=None, protocol="2025-11-25")
                ) as session,
            ):
                with pytest.raises(OutcomeUnknown) as exc_info:
                    await session.call_tool("convert", {})
        lines = str(exc_info.value).splitlines()
        assert lines[0] == "docs: connection lost after tools/call request 2 was sent: server exited with code 1"
        assert lines[1:] == ["  server stderr (last lines):", "    RuntimeError: the tool crashed"]


async def test_a_server_that_logs_to_stdout_and_dies_is_told_so_every_time() -> None:
    # Whether our first write fails (EPIPE) or the reader sees the end first, the session has read the line
    # before it hears of the death: the error quotes it.
    from runner.session import SessionOptions, open_session

    command = ["sh", "-c", "echo 'Listening on port 3000'; echo 'Error: EADDRINUSE' >&2; exit 1"]
    for _attempt in range(20):
        with trio.fail_after(LIMIT):
            with pytest.raises(ConnectFailed) as exc_info:
                async with (
                    open_stdio_transport(StdioParams(command)) as transport,
                    open_session(transport, SessionOptions(name="docs", server_log_level=None)),
                ):
                    pass  # pragma: no cover
        assert str(exc_info.value).splitlines() == [
            "could not initialize: server exited with code 1; it wrote text that is not JSON-RPC on stdout: "
            '"Listening on port 3000" (an MCP server must write only protocol messages on stdout; logs go to stderr)',
            "  server stderr (last lines):",
            "    Error: EADDRINUSE",
        ]
