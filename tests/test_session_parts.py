"""The pure parts split out of the session, each on its own: the handshake's checks and error text
(:mod:`runner.session.handshake`), the pending calls and their write state (:mod:`runner.session.pending`),
and the accounting of stray input (:mod:`runner.session.stray`). Session-level behaviour is in
``test_session.py``."""

from __future__ import annotations

import pytest
import trio

from runner.errors import (
    ConnectFailed,
    MalformedMessage,
    NotDelivered,
    OutcomeUnknown,
    TransportError,
    UnsupportedProtocolVersion,
)
from runner.protocol.jsonrpc import ErrorResponse, InvalidMessage, Response
from runner.protocol.mcp import LATEST_PROTOCOL_VERSION, Progress
from runner.session import WARN_FIRST, SessionOptions, SessionStats
from runner.session.handshake import initialize_failed, initialize_params, parse_initialize_result
from runner.session.pending import PendingCall, PendingCalls, Write
from runner.session.stray import StrayInput

# -- the handshake ------------------------------------------------------------------------------------


def test_initialize_asks_for_the_newest_version_as_the_configured_client() -> None:
    params = initialize_params(SessionOptions(client_name="ci", client_version="9"))
    assert params == {
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "ci", "version": "9"},
    }


def test_an_initialize_result_is_read_leniently_where_it_may_be() -> None:
    hello = parse_initialize_result(
        {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": "x", "instructions": 3}
    )
    assert hello.protocol_version == "2025-06-18" and hello.capabilities == {"tools": {}}
    assert hello.server_info == {} and hello.instructions is None


def test_an_initialize_result_must_speak_our_version_and_declare_capabilities() -> None:
    with pytest.raises(UnsupportedProtocolVersion):
        parse_initialize_result({"protocolVersion": "1999-01-01", "capabilities": {}})
    with pytest.raises(MalformedMessage, match="no capabilities object"):
        parse_initialize_result({"protocolVersion": "2025-11-25", "capabilities": []})


def test_a_failed_handshake_says_how_the_connection_ended_and_quotes_stray_output() -> None:
    ended = TransportError("srv: server exited with code 1", stderr="Traceback ...")
    lost = OutcomeUnknown("srv: connection lost after initialize request 1 was sent")
    error = initialize_failed("srv", lost, broken=ended, first_invalid=b"Starting up\x1b[0m", on_stdout=True)
    assert isinstance(error, ConnectFailed) and error.server == "srv" and error.stderr == "Traceback ..."
    assert str(error).startswith("could not initialize: server exited with code 1; it wrote text that is not ")
    assert '"Starting up\\x1b[0m"' in str(error) and "logs go to stderr" in str(error)


def test_a_handshake_timeout_keeps_its_reason_and_another_transport_gets_no_stdout_advice() -> None:
    error = initialize_failed(
        "srv",
        OutcomeUnknown("timed out"),
        "no answer within 5 s",
        broken=None,
        first_invalid=b"<x>",
        on_stdout=False,
    )
    assert str(error) == 'could not initialize: no answer within 5 s; it sent something that is not JSON-RPC: "<x>"'


def test_a_refused_connection_stays_retryable() -> None:
    refused = ConnectFailed("srv: connection refused", retryable=True)
    error = initialize_failed("srv", refused, broken=None, first_invalid=None, on_stdout=False)
    assert error.retryable and str(error) == "could not initialize: connection refused"


# -- pending calls ------------------------------------------------------------------------------------


async def test_a_dying_connection_fails_each_call_as_its_write_says() -> None:
    calls = PendingCalls()
    unsent, sending, written = PendingCall("tools/call"), PendingCall("tools/call"), PendingCall("ping")
    sending.start_write()
    written.start_write()
    written.end_write(written=True)
    for rid, call in enumerate((unsent, sending, written), start=1):
        calls.add(rid, call)
    calls.fail_all(TransportError("pipe closed", stderr="tail"), name="srv", what="connection lost")
    assert isinstance(unsent.error, NotDelivered) and not isinstance(unsent.error, OutcomeUnknown)
    assert str(unsent.error).startswith("srv: connection lost before tools/call request 1 was sent: pipe closed")
    assert not sending.done.is_set()  # its own write decides
    assert isinstance(written.error, OutcomeUnknown) and written.error.stderr == "tail"
    assert str(written.error).startswith("srv: connection lost after ping request 3 was sent")


async def test_a_write_is_made_once_and_a_failed_one_leaves_the_call_unsent() -> None:
    call = PendingCall("tools/call")
    call.start_write()
    with pytest.raises(RuntimeError):
        call.start_write()
    call.end_write(written=False)
    assert call.write is Write.UNSENT
    with pytest.raises(RuntimeError):
        call.end_write(written=True)


async def test_the_first_outcome_wins() -> None:
    call = PendingCall("ping")
    call.finish({"a": 1}, None)
    call.finish(None, NotDelivered("late"))
    assert call.result == {"a": 1} and call.error is None


async def test_progress_pushes_the_idle_deadline_back_never_past_the_hard_one(autojump_clock: trio.abc.Clock) -> None:
    seen: list[Progress] = []
    call = PendingCall("tools/call", timeout=10, idle_timeout=4, on_progress=seen.append)
    assert call.first_deadline == trio.current_time() + 4
    with trio.CancelScope(deadline=call.first_deadline) as scope:
        call.scope = scope
        await trio.sleep(3)
        call.progressed(Progress(1))
        assert scope.deadline == trio.current_time() + 4
        await trio.sleep(3)
        call.progressed(Progress(2))
        assert scope.deadline == call.timeout_at  # 6 + 4 would pass the hard cap at 10
    assert seen == [Progress(1), Progress(2)]
    assert PendingCall("ping").first_deadline == float("inf")


# -- stray input --------------------------------------------------------------------------------------


def test_stray_input_is_shown_a_few_times_then_counted() -> None:
    warnings: list[str] = []
    stray = StrayInput("srv", on_stdout=True, warn=warnings.append)
    for n in range(WARN_FIRST + 3):
        stray.invalid(InvalidMessage(f"log {n}".encode(), "not JSON: Expecting value"), failed_a_call=False)
    stray.invalid(InvalidMessage(b"{}", "no result", request_id=1), failed_a_call=True)
    assert stray.stats == SessionStats(invalid_lines=WARN_FIRST + 4)
    assert stray.first_invalid == b"log 0"
    assert warnings[0] == 'srv: ignored a line on stdout that is not JSON-RPC (not JSON): "log 0"'
    assert warnings[WARN_FIRST:] == ["srv: more output that is not JSON-RPC; further lines are only counted"]


def test_late_responses_are_counted_and_unmatched_ones_explained() -> None:
    warnings: list[str] = []
    stray = StrayInput("srv", on_stdout=False, warn=warnings.append)
    stray.unmatched(Response(2, {}), last_issued=5)  # ours, given up on
    stray.unmatched(Response("2", {}), last_issued=5)
    stray.unmatched(ErrorResponse(None, -32700, "parse error"), last_issued=5)
    stray.unmatched(Response(6, {}), last_issued=5)  # never issued
    assert stray.stats == SessionStats(unmatched_responses=3, late_responses=1)
    assert 'we sent the number 2, not the string "2"' in warnings[0]
    assert warnings[1].startswith("srv: ignored an error response with a null id: ")
    assert warnings[2].startswith("srv: ignored a response with id 6, which matches no request we sent: ")
