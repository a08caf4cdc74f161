"""JSON-RPC messages: round trips, precise rejection of invalid messages, tolerant batches."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import MalformedMessage
from runner.protocol.jsonrpc import (
    ErrorResponse,
    IdAllocator,
    InvalidMessage,
    Message,
    Notification,
    Request,
    Response,
    decode,
    decode_object,
    encode,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
params = st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=4)
ids = st.integers(-(2**53), 2**53) | st.text(max_size=12)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Request, ids, st.text(min_size=1, max_size=20), params),
    st.builds(Notification, st.text(min_size=1, max_size=20), params),
    st.builds(Response, ids, st.dictionaries(st.text(max_size=8), json_values, max_size=4)),
    st.builds(ErrorResponse, ids | st.none(), st.integers(-40000, 40000), st.text(max_size=30), json_values),
)


@given(messages)
def test_encode_decode_round_trip(message: Message) -> None:
    data = encode(message)
    assert b"\n" not in data
    assert decode(data) == [message]


def test_batch_array_tolerated() -> None:
    data = b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"notifications/progress"}]'
    assert decode(data) == [Response(1, {}), Notification("notifications/progress")]


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        ([], None),
        ("x", "expected a JSON object, got str"),
        ({"id": 1, "result": {}}, '"jsonrpc" must be "2.0", got None'),
        ({"jsonrpc": "1.0", "id": 1, "result": {}}, '"jsonrpc" must be "2.0"'),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, "request id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, "request id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, "request id must be a string or an integer"),
        ({"jsonrpc": "2.0", "method": 3}, '"method" must be a string'),
        ({"jsonrpc": "2.0", "method": "m", "params": [1]}, '"params" must be an object'),
        ({"jsonrpc": "2.0", "id": 1}, 'exactly one of "result" and "error"'),
        ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}, 'exactly one of "result" and "error"'),
        ({"jsonrpc": "2.0", "id": 1, "result": 3}, '"result" must be an object'),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}, "error code must be an integer"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, "error message must be a string"),
        ({"jsonrpc": "2.0"}, 'needs "method"'),
    ],
)
def test_invalid_messages_rejected_precisely(obj: Any, error: str | None) -> None:
    if error is None:
        assert decode(json.dumps(obj)) == [InvalidMessage(b"[]", "empty batch")]
        return
    with pytest.raises(MalformedMessage, match=error.replace("(", r"\(").replace('"', '"')):
        decode_object(obj)
    [invalid] = decode(json.dumps(obj))
    assert isinstance(invalid, InvalidMessage) and error in invalid.error


def test_invalid_response_keeps_its_id_for_the_waiting_call() -> None:
    [invalid] = decode(b'{"jsonrpc":"2.0","id":"abc","result":7}')
    assert isinstance(invalid, InvalidMessage) and invalid.request_id == "abc"


def test_not_json() -> None:
    [invalid] = decode(b"Starting server...")
    assert isinstance(invalid, InvalidMessage) and invalid.error.startswith("not JSON")
    assert invalid.request_id is None


def test_error_response_with_null_id() -> None:
    assert decode(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}') == [
        ErrorResponse(None, -32700, "parse")
    ]


def test_ids_never_reused() -> None:
    ids = IdAllocator()
    assert ids.last == 0
    seen = [ids.next() for _ in range(1000)]
    assert len(set(seen)) == 1000 and seen[0] == 1
    assert ids.last == seen[-1] == 1000


def test_deeply_nested_json_is_invalid_not_a_crash() -> None:
    [invalid] = decode(b"[" * 100_000 + b"]" * 100_000)
    assert isinstance(invalid, InvalidMessage) and "nested too deeply" in invalid.error
