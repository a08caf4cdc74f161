"""JSON-RPC 2.0 messages, sans-IO: encode to bytes, decode from bytes with precise errors.

The four message kinds are small slotted classes, not dicts, so a decoded message has been checked once and
the rest of the code can trust its fields. ``decode`` tolerates a JSON array (a batch, as 2025-03-26 peers
may send); we never send one.

Ids are strings or integers (never booleans, floats or null) and are matched exactly as sent: the integer
``1`` and the string ``"1"`` are different ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from runner.errors import MalformedMessage
from runner.jsontext import escape

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "ErrorResponse",
    "IdAllocator",
    "InvalidMessage",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "decode",
    "decode_object",
    "encode",
]

RequestId: TypeAlias = str | int

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603


@dataclass(slots=True, frozen=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None = None


@dataclass(slots=True, frozen=True)
class Notification:
    method: str
    params: dict[str, Any] | None = None
    # Not on the wire: the request whose stream carried this notification, when the transport knows it
    # (a Streamable HTTP POST stream does; stdio does not).
    related_request_id: RequestId | None = None


@dataclass(slots=True, frozen=True)
class Response:
    id: RequestId
    result: dict[str, Any]


@dataclass(slots=True, frozen=True)
class ErrorResponse:
    id: RequestId | None
    code: int
    message: str
    data: Any = None


Message: TypeAlias = Request | Notification | Response | ErrorResponse


@dataclass(slots=True, frozen=True)
class InvalidMessage:
    """Something the peer sent that is not a valid message. ``request_id`` is set when it could be read,
    so the call waiting for it can fail at once instead of waiting for a timeout."""

    raw: bytes
    error: str
    request_id: RequestId | None = None


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def encode(message: Message) -> bytes:
    """One message as compact UTF-8 JSON, without a trailing newline."""
    obj: dict[str, Any]
    if type(message) is Request:
        obj = {"jsonrpc": "2.0", "id": message.id, "method": message.method}
        if message.params is not None:
            obj["params"] = message.params
    elif type(message) is Notification:
        obj = {"jsonrpc": "2.0", "method": message.method}
        if message.params is not None:
            obj["params"] = message.params
    elif type(message) is Response:
        obj = {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    elif type(message) is ErrorResponse:
        err: dict[str, Any] = {"code": message.code, "message": message.message}
        if message.data is not None:
            err["data"] = message.data
        obj = {"jsonrpc": "2.0", "id": message.id, "error": err}
    else:  # pragma: no cover - the type system rules this out
        raise TypeError(f"not a JSON-RPC message: {message!r}")
    return escape(_dumps(obj)).encode()  # a lone surrogate (echoed back from a result) as \ud800


def _is_id(value: object) -> bool:
    t = type(value)
    return t is str or t is int


def decode_object(obj: Any) -> Message:
    """Check one parsed JSON value and turn it into a message; ``MalformedMessage`` says what is wrong."""
    if type(obj) is not dict:
        raise MalformedMessage(f"expected a JSON object, got {type(obj).__name__}")
    if obj.get("jsonrpc") != "2.0":
        raise MalformedMessage(f'"jsonrpc" must be "2.0", got {obj.get("jsonrpc")!r}')
    method = obj.get("method")
    if method is not None:
        if type(method) is not str:
            raise MalformedMessage(f'"method" must be a string, got {type(method).__name__}')
        params = obj.get("params")
        if params is not None and type(params) is not dict:
            raise MalformedMessage(f'{method}: "params" must be an object, got {type(params).__name__}')
        if "id" not in obj:
            return Notification(method, params)
        rid = obj["id"]
        if not _is_id(rid):
            raise MalformedMessage(f"{method}: request id must be a string or an integer, got {rid!r}")
        return Request(rid, method, params)
    if "id" not in obj:
        raise MalformedMessage('a message needs "method" (request or notification) or "id" (response)')
    rid = obj["id"]
    has_result = "result" in obj
    has_error = "error" in obj
    if has_result == has_error:
        raise MalformedMessage(f'response {rid!r} must have exactly one of "result" and "error"')
    if has_result:
        if not _is_id(rid):
            raise MalformedMessage(f"response id must be a string or an integer, got {rid!r}")
        result = obj["result"]
        if type(result) is not dict:
            raise MalformedMessage(f'response {rid!r}: "result" must be an object, got {type(result).__name__}')
        return Response(rid, result)
    if rid is not None and not _is_id(rid):
        raise MalformedMessage(f"error response id must be a string, an integer or null, got {rid!r}")
    err = obj["error"]
    if type(err) is not dict:
        raise MalformedMessage(f'response {rid!r}: "error" must be an object, got {type(err).__name__}')
    code = err.get("code")
    message = err.get("message")
    if type(code) is not int:
        raise MalformedMessage(f"response {rid!r}: error code must be an integer, got {code!r}")
    if type(message) is not str:
        raise MalformedMessage(f"response {rid!r}: error message must be a string, got {message!r}")
    return ErrorResponse(rid, code, message, err.get("data"))


def _salvage_id(obj: Any) -> RequestId | None:
    if type(obj) is dict and "method" not in obj:
        rid = obj.get("id")
        if isinstance(rid, str | int) and not isinstance(rid, bool):
            return rid
    return None


def decode(data: bytes | str) -> list[Message | InvalidMessage]:
    """Decode one frame: a message, or an array of them (a batch). Never raises for bad input: each
    invalid part comes back as an ``InvalidMessage`` naming what is wrong."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        return [InvalidMessage(raw, f"not JSON: {exc}")]
    except RecursionError:
        return [InvalidMessage(raw, "JSON nested too deeply")]
    if type(obj) is list:
        if not obj:
            return [InvalidMessage(raw, "empty batch")]
        items = obj
    else:
        items = [obj]
    out: list[Message | InvalidMessage] = []
    for item in items:
        try:
            out.append(decode_object(item))
        except MalformedMessage as exc:
            out.append(InvalidMessage(raw, str(exc), _salvage_id(item)))
    return out


class IdAllocator:
    """Request ids for one session: integers counting up from 1, never reused."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last += 1
        return self._last

    @property
    def last(self) -> int:
        """The last id handed out (0 before the first): every id we issued is an integer in 1..last."""
        return self._last
