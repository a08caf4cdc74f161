"""JSON-RPC messages: round trips, precise rejection of invalid messages, tolerant batches."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import MalformedMessage
from runner.jsontext import escape
from runner.protocol.jsonrpc import (
    MAX_DEPTH,
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
    encoded,
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


@given(ids, st.text(min_size=1, max_size=20), params)
def test_a_request_written_once_is_sent_as_written(rid: Any, method: str, p: dict[str, Any] | None) -> None:
    """``encoded`` writes the bytes ``encode`` then returns as they are: the standard library's compact text."""
    request = encoded(Request(rid, method, p))
    obj: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if p is not None:
        obj["params"] = p
    expected = escape(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)).encode()
    assert request.wire == expected
    assert encode(request) == expected
    assert encoded(request) is request
    assert request == Request(rid, method, p)  # the bytes are not part of the message's identity


def test_encode_returns_the_written_bytes_without_writing_again() -> None:
    request = Request(1, "tools/call", {"name": "t", "arguments": {}}, wire=b'{"written":"before"}')
    assert encode(request) == b'{"written":"before"}'


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (10**5000, ValueError),
        (object(), TypeError),
        ({1, 2}, TypeError),
    ],
    ids=["nan", "inf", "long-int", "object", "set"],
)
def test_what_json_cannot_carry_is_refused(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        encoded(Request(1, "tools/call", {"name": "t", "arguments": {"v": [value]}}))


def test_a_value_that_contains_itself_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(RecursionError):
        encoded(Request(1, "tools/call", {"name": "t", "arguments": {"v": loop}}))
    # and the encoder keeps no trace of it: the same list, unlooped, is written
    loop.clear()
    assert encode(Request(1, "x", {"v": loop})) == b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"v":[]}}'


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
    assert isinstance(invalid, InvalidMessage) and f"nested deeper than {MAX_DEPTH} levels" in invalid.error
    assert invalid.request_id is None


def _response(rid: str, inner: str) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{rid},"result":{{"structuredContent":{{"x":{inner}}}}}}}'.encode()


@pytest.mark.parametrize("levels", [MAX_DEPTH - 4, MAX_DEPTH - 3])  # under the message, result, structuredContent
def test_nesting_up_to_the_cap_is_a_message(levels: int) -> None:
    data = _response("7", "[" * levels + json.dumps('[[{{\\"]} \\') + "]" * levels)  # brackets in strings: not counted
    [message] = decode(data)
    assert message == Response(7, json.loads(data)["result"])


@pytest.mark.parametrize("levels", [MAX_DEPTH - 2, 900, 50_000])
def test_nesting_past_the_cap_fails_the_call_it_answers(levels: int) -> None:
    [invalid] = decode(_response('"a\\"}"', "[" * levels + "1" + "]" * levels))
    assert isinstance(invalid, InvalidMessage)
    assert invalid.error == f"JSON nested deeper than {MAX_DEPTH} levels"
    assert invalid.request_id == 'a"}'  # read, so the call fails at once instead of waiting for its timeout


@pytest.mark.parametrize("levels", [MAX_DEPTH, 50_000])
def test_a_deep_request_or_batch_names_no_call(levels: int) -> None:
    deep = "[" * levels + "]" * levels
    for data in (
        f'{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"x":{deep}}}}}',
        f'[{{"jsonrpc":"2.0","id":3,"result":{{"x":{deep}}}}}]',
    ):
        [invalid] = decode(data.encode())
        assert isinstance(invalid, InvalidMessage) and invalid.request_id is None


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused_with_the_id(constant: str) -> None:
    [invalid] = decode(_response("4", f"[1, {constant}]"))
    assert isinstance(invalid, InvalidMessage)
    assert invalid.error == f"{constant} is not a JSON number"
    assert invalid.request_id == 4


def test_an_integer_too_long_to_convert_is_refused_with_the_id() -> None:
    [invalid] = decode(_response("5", "9" * 5000))
    assert isinstance(invalid, InvalidMessage)
    assert invalid.error == f"an integer longer than {sys.get_int_max_str_digits():,} digits"
    assert invalid.request_id == 5
    assert decode(_response("5", "9" * 4000)) == [Response(5, {"structuredContent": {"x": int("9" * 4000)}})]


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=3)


_JSON = st.recursive(st.none() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9'), _containers, max_leaves=40)


@given(value=_JSON, wrap=st.integers(min_value=MAX_DEPTH - 12, max_value=MAX_DEPTH + 2))
def test_the_depth_check_agrees_with_the_parsed_value(value: Any, wrap: int) -> None:
    """Near the cap, whatever the strings hold (brackets, quotes, backslashes): refused exactly when deeper."""
    for n in range(wrap):
        value = {'k\\"[': [value, "]"]} if n % 7 == 0 else [value]
    message = {"jsonrpc": "2.0", "id": 1, "result": {"v": value}}
    [decoded] = decode(json.dumps(message, ensure_ascii=False).encode())
    assert isinstance(decoded, InvalidMessage) == (_depth(message) > MAX_DEPTH)
