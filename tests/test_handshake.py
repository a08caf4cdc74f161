"""The handshake on its own (:mod:`runner.session.handshake`): the initialize request, reading its result, and
the error text when it fails. The handshake over a connection is in ``test_session.py``."""

from __future__ import annotations

import pytest

from runner.errors import ConnectFailed, MalformedMessage, OutcomeUnknown, TransportError, UnsupportedProtocolVersion
from runner.protocol.mcp import LATEST_PROTOCOL_VERSION
from runner.session import SessionOptions
from runner.session.handshake import initialize_failed, initialize_params, parse_initialize_result


def test_initialize_asks_for_the_newest_version_as_the_configured_client() -> None:
    params = initialize_params(SessionOptions(client_name="ci", client_version="9"))
    assert params == {
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": {"tasks": {}},
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
