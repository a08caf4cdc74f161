"""The stdio transport: the server is a child process; one JSON-RPC message per line on its stdin/stdout.

::

    async with open_stdio_transport(StdioParams(["python", "server.py"])) as transport:
        await transport.send(Request(1, "ping"))
        event = await transport.receive()

**Spawning.** ``command`` is an argv list, never run by a shell. The child gets its own session (its own
process group; no SIGINT from the terminal: we stop it ourselves) and an allow-listed environment, not the
runner's: ``ALLOWED_ENV_VARS`` (HOME, LOGNAME, PATH, SHELL, TERM, USER, LANG, LC_ALL, TMPDIR; values that look
like exported shell functions are skipped) plus ``StdioParams.env``, which wins. A command that cannot be
started (not found, not executable, missing working directory) raises ``ConnectFailed``. This module knows no
workflow: callers hand it an argv and a working directory already resolved (see :mod:`runner.launch`).

**Reading.** stdout is split into lines capped at ``max_message_size`` and decoded. A line that is not
JSON-RPC comes out of ``receive`` as ``InvalidMessage`` (counted in ``stray_lines``); an oversized line fails
the connection with ``FrameTooLarge``. At the end of stdout (an unterminated last line is still delivered),
``receive`` raises ``TransportError("server exited with code N")`` after the messages before it. Once the server
has exited, its stdout may stay silent ``EXIT_GRACE`` seconds at most (a grandchild may hold it open). stderr
is the server's log, never an error: its last ``stderr_tail_bytes`` bytes (``stderr_tail()``) go with every
connection error. Connection errors are final: ``receive`` raises the same one again, ``send`` raises
``NotDelivered``.

**A crash is reported whole.** A server that dies leaves three things behind: its exit status, the end of
its stderr and the end of its stdout, which arrive in no set order. No connection error is built before all
three are in (``EXIT_GRACE`` at most, as a grandchild may hold a pipe open): the end of stdout waits for the
exit and the end of stderr; a write that fails because the server is gone (``EPIPE``) also waits until
``receive`` has handed out everything the server wrote before it exited, and the end itself. So the error
always carries the whole stderr tail and a reader has seen the server's last words before a writer hears of
its death.

**Writing.** ``send`` may be called from many tasks. It queues its line and waits for one writer task, which
writes every line queued since its last write with one ``os.write`` when the pipe has room (with many calls in
flight: fewer system calls, and fewer wake-ups of the server). ``send`` returns once its line is written;
``queue`` (``runner.transports.base.Queued``) returns at once and has the writer say how the write ended.
Lines go out whole and in order: a send cancelled (a queued line withdrawn) before the writer took its line
takes it back (surely not sent); later, its line is still written whole, so the server never sees a torn line
(and the cancelled message may reach it). A failed write raises ``NotDelivered`` in every send whose line was
not written completely, and says so to every queued line in that case.

**Shutdown** (leaving the ``async with``, also when cancelled; each wait lasts ``shutdown_timeout`` at most):

1. close the server's stdin (the polite request to exit) and wait for it to exit;
2. SIGTERM to its process group; wait for the server and the rest of the group;
3. SIGKILL to the group; wait again.

A step runs only while something in the group still runs: a server that exits on EOF and leaves no children
costs one wait. Children a server leaves behind are stopped too, unless they left the group (``setsid``). The
server is reaped, then the reader tasks are cancelled and the pipes closed.
"""

from __future__ import annotations

import itertools
import math
import os
import shlex
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final

import trio

from runner._trio import single_error
from runner.errors import ConnectFailed, FrameTooLarge, McpRunError, NotDelivered, ServerError, TransportError
from runner.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, LineDecoder
from runner.protocol.jsonrpc import InvalidMessage, Message, RequestId, decode, encode
from runner.transports.base import Gate, TransportEvent, Written

__all__ = [
    "ALLOWED_ENV_VARS",
    "EXIT_GRACE",
    "StdioParams",
    "StdioTransport",
    "default_environment",
    "open_stdio_transport",
]

ALLOWED_ENV_VARS: Final = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
EXIT_GRACE: Final = 1.0  # seconds between the server's exit and giving up on EOF (and on its exit code)
_READ_SIZE: Final = 65536
_EVENT_BUFFER: Final = 64  # events read ahead of ``receive``; beyond it, the server waits on a full pipe
_POLL: Final = 0.02  # processes we did not spawn cannot be waited for, only polled


@dataclass(frozen=True)
class StdioParams:
    """How to start a server: argv, working directory, extra environment, limits (see the module docstring)."""

    command: Sequence[str]
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    shutdown_timeout: float = 2.0
    stderr_tail_bytes: int = 8192
    redact: Callable[[str], str] | None = field(default=None, compare=False)
    """Applied to the stderr tail before it goes into an error (the caller's secrets masked in the raw text,
    before it is cut into lines and indented)."""

    def __post_init__(self) -> None:
        if isinstance(self.command, str):
            raise TypeError("command must be an argv list, not a string (it is never run by a shell)")
        if not self.command:
            raise ValueError("command must not be empty")
        if self.shutdown_timeout < 0 or self.stderr_tail_bytes < 0:
            raise ValueError("shutdown_timeout and stderr_tail_bytes must not be negative")
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", dict(self.env))


def default_environment() -> dict[str, str]:
    """The part of the runner's environment every server inherits."""
    env = {}
    for key in ALLOWED_ENV_VARS:
        value = os.environ.get(key)
        if value is not None and not value.startswith("()"):
            env[key] = value
    return env


class _Batch:
    """Lines queued for one write. ``ends[i]`` is where line ``i`` ends in the written data, ``written`` how
    much of it went out; ``failure`` says why the rest did not."""

    __slots__ = ("done", "ends", "failure", "gates", "lines", "told", "written")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.gates: list[Gate] = []  # what must open before any of it is written (dispatch records, durable)
        self.told: list[Written | None] = []  # per line: whom to tell how its write ended (queued lines)
        self.ends: list[int] = []
        self.written = 0
        self.failure: NotDelivered | None = None
        self.done = trio.Event()

    def fail(self, message: str, stderr: str, cause: BaseException | None = None) -> None:
        self.failure = NotDelivered(message, stderr=stderr)
        self.failure.__cause__ = cause

    def unsent(self, index: int) -> bool:
        """Line ``index`` surely did not reach the server: the write failed before the end of its message. A
        message written whole but for its newline may have: a server may read a last line without one at EOF."""
        return self.failure is not None and self.written < self.ends[index] - 1

    def finish(self) -> None:
        """The writer is done with this batch: tell each queued line how its write ended, wake the senders."""
        failure = self.failure
        for index, told in enumerate(self.told):
            if told is not None:
                told(failure if self.unsent(index) else None)
        self.done.set()


class StdioTransport:
    """One running server. Made by ``open_stdio_transport``; implements ``runner.transports.base.Transport``."""

    def __init__(self, process: trio.Process, params: StdioParams) -> None:
        assert isinstance(process.stdin, trio.lowlevel.FdStream)
        assert isinstance(process.stdout, trio.lowlevel.FdStream)
        assert isinstance(process.stderr, trio.lowlevel.FdStream)
        self._process = process
        self._params = params
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._stderr = process.stderr
        self._queued: _Batch | None = None  # lines waiting for the writer
        self._gated: _Batch | None = None  # the batch the writer took, while it waits for its gates
        self._writer_done = False  # the writer task has ended: nothing more is written
        self._writer_wake = trio.Event()
        self._events_send, self._events = trio.open_memory_channel[TransportEvent](_EVENT_BUFFER)
        self._error: ServerError | None = None
        self._exited = False
        self._read_scope = trio.CancelScope()  # of the stdout read in progress
        self._stderr_tail = bytearray()
        self._stderr_cut = False
        self._stderr_closed = trio.Event()
        self._end_received = trio.Event()  # receive has raised the connection error (everything before it is out)
        self.stray_lines = 0
        """Invalid messages read from stdout so far (mostly log lines printed to the wrong stream)."""

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The server's exit status once it has exited (negative: killed by that signal)."""
        return self._process.returncode

    async def send(self, message: Message, /) -> None:
        data = encode(message) + b"\n"
        await trio.lowlevel.checkpoint_if_cancelled()
        batch, index = self._add(data, None)
        try:
            await batch.done.wait()
        except trio.Cancelled:
            if batch is self._queued or batch is self._gated:  # not being written yet: withdraw the line
                batch.lines[index] = b""
            raise
        if batch.unsent(index):
            failure = batch.failure
            assert failure is not None
            raise NotDelivered(_text(failure), stderr=failure.stderr) from failure.__cause__

    def queue(self, message: Message, written: Written, gate: Gate | None = None, /) -> Callable[[], bool]:
        """Queue ``message`` for the writer and return at once (see ``runner.transports.base.Queued``)."""
        batch, index = self._add(encode(message) + b"\n", written)
        if gate is not None and not gate.passed():
            batch.gates.append(gate)

        def withdraw() -> bool:
            if batch is not self._queued and batch is not self._gated:
                return False  # the writer is writing it: it goes out whole
            batch.lines[index] = b""
            batch.told[index] = None
            return True

        return withdraw

    def _add(self, data: bytes, written: Written | None) -> tuple[_Batch, int]:
        """Add a line to the batch the writer takes next (a new one wakes it); returns the batch and the line's
        place in it."""
        if self._error is not None or self._writer_done:
            raise self._closed()
        batch = self._queued
        if batch is None:
            batch = self._queued = _Batch()
            self._writer_wake.set()
        batch.lines.append(data)
        batch.told.append(written)
        return batch, len(batch.lines) - 1

    async def _write_stdin(self) -> None:
        """The writer task: each batch of queued lines in one write (several when the pipe is full)."""
        batch: _Batch | None = None
        try:
            while True:
                await self._writer_wake.wait()
                self._writer_wake = trio.Event()
                batch, self._queued = self._queued, None
                if batch is None:
                    continue
                gated = await self._wait_for_gates(batch) if batch.gates else None
                batch.ends = list(itertools.accumulate(map(len, batch.lines)))
                if gated is not None:
                    batch.fail(f"not written: {_text(gated)}", self.stderr_tail(), gated)
                elif self._error is not None:
                    error = self._error
                    batch.fail(f"connection is closed: {_text(error)}", self.stderr_tail(), error)
                else:
                    await self._write(batch)
                batch.finish()
                batch = None
        finally:  # the transport is closing: nothing more will be written
            self._writer_done = True
            for unfinished in (batch, self._queued):
                if unfinished is not None:
                    if len(unfinished.ends) != len(unfinished.lines):  # never taken by the writer
                        unfinished.ends = list(itertools.accumulate(map(len, unfinished.lines)))
                    if unfinished.failure is None:
                        unfinished.fail("cannot write to the server: the transport is closed", self.stderr_tail())
                    unfinished.finish()
            self._queued = None

    async def _wait_for_gates(self, batch: _Batch) -> McpRunError | None:
        """Wait until every gate of ``batch`` (taken by the writer) has opened. Lines queued meanwhile go to the
        next batch (a line already durable never waits for a later one's fsync); a line of this one can still be
        withdrawn. Returns the error of a gate that cannot open (nothing of the batch is then written)."""
        self._gated = batch
        try:
            for gate in batch.gates:
                if not gate.passed():
                    await gate.wait()
        except McpRunError as exc:
            return exc
        finally:
            self._gated = None
        return None

    async def _write(self, batch: _Batch) -> None:
        # os.write rather than send_all: a failed send_all cannot say how much of the data went out.
        view = memoryview(b"".join(batch.lines))
        try:
            while view:
                try:
                    written = os.write(self._stdin.fileno(), view)  # fileno() is -1 once closed
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self._stdin.fileno())
                else:
                    view = view[written:]
                    batch.written += written
        except (OSError, trio.ClosedResourceError) as exc:
            closed = self._stdin.fileno() < 0
            if not closed:  # the server closed its end, mostly by exiting: let it finish dying first
                await self._settle()
            error = self._error
            reason = (
                _text(error)
                if error is not None and not isinstance(error, FrameTooLarge)
                else self._exit_status() or ("the transport is closed" if closed else getattr(exc, "strerror", None))
            )
            batch.fail(f"cannot write to the server: {reason}", self.stderr_tail(), exc)

    async def _settle(self) -> None:
        """Wait, ``EXIT_GRACE`` at most, for the server's exit, the end of its stderr, and ``receive`` to have
        handed out the end of stdout (see "A crash is reported whole" in the module docstring)."""
        with trio.move_on_after(EXIT_GRACE):
            await self._process.wait()
            await self._stderr_closed.wait()
            await self._end_received.wait()

    async def receive(self) -> TransportEvent:
        # An event already read comes back without a trip through trio's scheduler: the session then handles
        # everything one read brought in one go, so the calls it completes send their next requests together.
        try:
            try:
                return self._events.receive_nowait()
            except trio.WouldBlock:
                return await self._events.receive()
        except trio.EndOfChannel:
            assert self._error is not None
            self._end_received.set()
            raise self._error from None

    def abandon(self, request_id: RequestId, /) -> None:
        """Nothing is held per request on a pipe: a late response is read and dropped by the session."""

    def set_protocol_version(self, version: str, /) -> None:
        pass

    def describe(self) -> str:
        text = shlex.join(self._params.command)
        return "stdio: " + (text if len(text) <= 80 else text[:79] + "…")

    def stderr_tail(self) -> str:
        """The last ``stderr_tail_bytes`` bytes the server wrote to stderr, from the start of a line (a line cut
        by the limit is left out: a secret on it could not be recognised), passed through ``redact``."""
        tail = bytes(self._stderr_tail)
        if self._stderr_cut:
            tail = tail.partition(b"\n")[2]
        text = tail.decode(errors="replace")
        return self._params.redact(text) if self._params.redact is not None else text

    def _closed(self) -> NotDelivered:
        """Why nothing more can be written: the connection's error, or the writer has stopped."""
        error = self._error
        reason = _text(error) if error is not None else "the transport is closed"
        failure = NotDelivered(f"connection is closed: {reason}", stderr=self.stderr_tail())
        failure.__cause__ = error
        return failure

    def _fail(self, error: ServerError) -> None:
        if self._error is None:
            self._error = error
        self._events_send.close()

    def _exit_status(self) -> str | None:
        code = self._process.returncode
        if code is None:
            return None
        if code < 0:
            try:
                return f"server exited with code {code} (killed by {signal.Signals(-code).name})"
            except ValueError:
                pass
        return f"server exited with code {code}"

    async def _read_stdout(self) -> None:
        stdout = self._stdout
        decoder = LineDecoder(self._params.max_message_size)
        delivering = True  # after a failure, or once nobody receives, stdout is drained so the server never blocks
        held_open = False
        try:
            while True:
                # Once the server has exited, a read waits EXIT_GRACE at most: a child may hold the pipe open.
                # _watch_exit shortens the read in progress when the exit happens.
                deadline = trio.current_time() + EXIT_GRACE if self._exited else math.inf
                with trio.CancelScope(deadline=deadline) as self._read_scope:
                    chunk = await stdout.receive_some(_READ_SIZE)
                if self._read_scope.cancelled_caught:
                    held_open = True
                    break
                if not chunk:
                    if delivering and (last := decoder.close()) is not None:
                        await self._deliver(last)
                    break
                if delivering:
                    delivering = await self._deliver_lines(decoder, chunk)
        except trio.BrokenResourceError:  # a failed read is an end of stream, or the transport is closing
            pass
        if self._error is None:
            await self._stdout_ended(held_open)

    async def _deliver_lines(self, decoder: LineDecoder, chunk: bytes) -> bool:
        """Deliver the lines ``chunk`` completes; False once nothing more is to be delivered (a line too large,
        which fails the transport, or the transport is closing)."""
        try:
            for line in decoder.feed(chunk):
                await self._deliver(line)
        except FrameTooLarge as exc:
            self._fail(exc)
            return False
        except trio.BrokenResourceError:  # the transport is closing
            return False
        return True

    async def _stdout_ended(self, held_open: bool) -> None:
        """Fail the transport for an ended stdout, with the exit status once it follows (``held_open``: the
        server exited but a child still holds its stdout)."""
        if not held_open:
            with trio.move_on_after(EXIT_GRACE):  # the exit code and the last of stderr follow shortly
                await self._process.wait()
                await self._stderr_closed.wait()
        status = self._exit_status() or "server closed its stdout"
        if held_open:
            status += " (its stdout is still held open, probably by a child process)"
        self._fail(TransportError(status, stderr=self.stderr_tail()))

    async def _deliver(self, line: bytes) -> None:
        for event in decode(line):
            if type(event) is InvalidMessage:
                self.stray_lines += 1
            try:
                self._events_send.send_nowait(event)
            except trio.WouldBlock:
                # Shielded: what was read must not be lost to the exit deadline on reads. Shutdown closes the
                # receiving end before cancelling us, which ends this wait.
                with trio.CancelScope(shield=True):
                    await self._events_send.send(event)

    async def _read_stderr(self) -> None:
        tail = self._stderr_tail
        keep = self._params.stderr_tail_bytes
        try:
            while chunk := await self._stderr.receive_some(_READ_SIZE):
                tail += chunk
                if len(tail) > keep:
                    del tail[: len(tail) - keep]
                    self._stderr_cut = True
        except trio.BrokenResourceError:
            pass
        finally:
            self._stderr_closed.set()

    async def _watch_exit(self) -> None:
        await self._process.wait()
        self._exited = True
        self._read_scope.deadline = trio.current_time() + EXIT_GRACE

    # -- the lifecycle: open_stdio_transport calls these in this order ----------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        """Start the tasks that write stdin and read stdout, stderr and the server's exit, in ``nursery``."""
        nursery.start_soon(self._read_stdout)
        nursery.start_soon(self._write_stdin)
        nursery.start_soon(self._read_stderr)
        nursery.start_soon(self._watch_exit)

    async def shut_down(self) -> None:
        """Stop the server as the module docstring's *Shutdown* says (stdin closed, then SIGTERM, then
        SIGKILL to its group, each wait bounded by ``shutdown_timeout``). ``receive`` ends from now on."""
        self._events.close()
        await self._stdin.aclose()
        timeout = self._params.shutdown_timeout
        with trio.move_on_after(timeout):
            await self._process.wait()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not self._signal_group(sig):
                break
            with trio.move_on_after(timeout):
                await self._process.wait()
                while _group_alive(self._process.pid):  # noqa: ASYNC110 - nothing can notify us
                    await trio.sleep(_POLL)

    def close_pipes(self) -> None:
        """Close our ends of the pipes, once the tasks of ``start`` are done (closing a stream a task reads
        makes it raise)."""
        self._stdin.close()
        self._stdout.close()
        self._stderr.close()

    def _signal_group(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the server's process group; False when nothing in it runs any more."""
        # A session leader's pid is its group id, and stays allocated while the group has members, even once
        # the leader is reaped: signalling the group cannot hit an unrelated process.
        pgid = self._process.pid
        if self._process.returncode is not None and not _group_alive(pgid):
            return False
        try:
            os.killpg(pgid, sig)
        except OSError:
            return False
        return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: a container's init may never reap
    the grandchildren it inherits."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            state, _ppid, pgrp = stat[stat.rfind(b")") + 2 :].split(maxsplit=3)[:3]
            if int(pgrp) == pgid and state not in (b"Z", b"X"):
                return True
    return False


def _text(error: BaseException) -> str:
    return str(error.args[0]) if error.args else type(error).__name__


@asynccontextmanager
async def open_stdio_transport(params: StdioParams) -> AsyncIterator[StdioTransport]:
    """Start the server, yield its transport, and stop it (see the module docstring) on the way out."""
    try:
        process = await trio.lowlevel.open_process(
            list(params.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=params.cwd,
            env=default_environment() | dict(params.env),
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
        filename = getattr(exc, "filename", None)
        what = f"working directory {params.cwd!r}" if params.cwd and filename == params.cwd else None
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConnectFailed(
            f"cannot start server {params.command[0]!r}: " + (f"{what}: {reason}" if what else reason)
        ) from exc
    transport = StdioTransport(process, params)
    try:
        with single_error():  # our tasks do not raise: let what the body raised out of the nursery's group
            async with trio.open_nursery() as nursery:
                transport.start(nursery)
                try:
                    yield transport
                finally:
                    with trio.CancelScope(shield=True):
                        await transport.shut_down()
                    nursery.cancel_scope.cancel()
    finally:
        transport.close_pipes()  # only once the tasks are done
