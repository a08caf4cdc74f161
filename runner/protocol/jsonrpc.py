"""JSON-RPC 2.0 messages, sans-IO: encode to bytes, decode from bytes with precise errors.

The four message kinds are small slotted classes, not dicts, so a decoded message has been checked once and
the rest of the code can trust its fields. ``decode`` tolerates a JSON array (a batch, as 2025-03-26 peers
may send); we never send one.

Ids are strings or integers (never booleans, floats or null) and are matched exactly as sent: the integer
``1`` and the string ``"1"`` are different ids.

What the code after ``decode`` could not handle is refused here, as an invalid message: JSON nested deeper
than :data:`MAX_DEPTH` levels (every later walk of a result is then far from Python's recursion limit),
``NaN``/``Infinity``/``-Infinity`` (not JSON, and not encodable again) and integers longer than Python's
int-to-str limit (4,300 digits). The request id of such a response is still read when it can be, so the call
waiting for it fails at once (its outcome unknown) instead of waiting for a timeout.
"""

from __future__ import annotations

import enum
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from json.encoder import c_encode_basestring, c_make_encoder  # type: ignore[attr-defined]
from typing import Any, Final, Literal, TypeAlias

from runner.errors import MalformedMessage
from runner.jsontext import escape

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_DEPTH",
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
    "encoded",
]

RequestId: TypeAlias = str | int

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

MAX_DEPTH: Final = 200
"""How deeply a message may nest arrays and objects (the message itself is the first level)."""


@dataclass(slots=True, frozen=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None = None
    # Not on the wire: HTTP headers that go with this request (2026-07-28 mirrors the body in headers).
    headers: Mapping[str, str] | None = field(default=None, compare=False)
    # The request's bytes, once :func:`encoded` wrote them: :func:`encode` returns these instead of writing again.
    wire: bytes | None = field(default=None, compare=False, repr=False)


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


def _not_json(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The standard library's C encoder, built once (``JSONEncoder.encode`` builds one per call): the text of
# ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``. Without its table of
# containers seen (that table keeps stale entries after an error): a value that contains itself raises
# ``RecursionError`` instead of ``ValueError``.
_encoder = c_make_encoder(None, _not_json, c_encode_basestring, None, ":", ",", False, False, False)


def _dumps(obj: dict[str, Any]) -> str:
    return "".join(_encoder(obj, 0))


def encode(message: Message) -> bytes:
    """One message as compact UTF-8 JSON, without a trailing newline."""
    obj: dict[str, Any]
    if type(message) is Request:
        if message.wire is not None:
            return message.wire
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


def encoded(request: Request) -> Request:
    """``request`` with its bytes written (``wire``), so that the transport sends them as they are: a caller
    that must know a request can be written before it acts (journals its dispatch) encodes it once, here.
    Raises ``ValueError`` (``NaN``, an integer too long to write), ``TypeError`` (not JSON) or
    ``RecursionError`` (nested too deeply, or a value that contains itself)."""
    if request.wire is not None:
        return request
    return Request(request.id, request.method, request.params, request.headers, encode(request))


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
        return _decode_call(obj, method)
    if "id" not in obj:
        raise MalformedMessage('a message needs "method" (request or notification) or "id" (response)')
    rid = obj["id"]
    has_result = "result" in obj
    if has_result == ("error" in obj):
        raise MalformedMessage(f'response {rid!r} must have exactly one of "result" and "error"')
    if not has_result:
        return _decode_error(obj, rid)
    if not _is_id(rid):
        raise MalformedMessage(f"response id must be a string or an integer, got {rid!r}")
    result = obj["result"]
    if type(result) is not dict:
        raise MalformedMessage(f'response {rid!r}: "result" must be an object, got {type(result).__name__}')
    return Response(rid, result)


def _decode_call(obj: dict[str, Any], method: Any) -> Request | Notification:
    """A message with a ``method``: a request (it has an ``id``) or a notification."""
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


def _decode_error(obj: dict[str, Any], rid: Any) -> ErrorResponse:
    """A response with an ``error`` (its id may be null: the server could not read the request's)."""
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


class _NotANumber(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotANumber(f"{name} is not a JSON number")


def _lenient_int(text: str) -> int:
    return int(text) if len(text) <= 4000 else 0


def _none(_name: str) -> None:
    return None


_strict = json.JSONDecoder(parse_constant=_refuse_constant).decode
# Only to read the id of a message refused for a number: it reads what the strict decoder refuses.
_lenient = json.JSONDecoder(parse_constant=_none, parse_int=_lenient_int).decode

# Only the characters that matter to nesting: quotes and brackets ({ and } as [ and ]).
_NESTING: Final = bytes.maketrans(b"{}", b"[]")
_NOT_NESTING: Final = bytes(b for b in range(256) if b not in b'"[]{}')
_SIGNED: Final = bytes.maketrans(b"[]", b"\x01\xff")  # +1 and -1 as signed bytes


def _too_deep(utf8: bytes) -> bool:
    """Whether valid JSON ``utf8`` nests deeper than ``MAX_DEPTH``. Free for most messages: it needs more
    than ``MAX_DEPTH`` opening brackets before it looks further. Then only C-speed passes over the text: the
    brackets outside strings are kept, the innermost pairs taken away a few times (most results are shallow),
    and what is left is summed."""
    if utf8.count(b"[") + utf8.count(b"{") <= MAX_DEPTH:
        return False
    if b"\\" in utf8:  # an escaped quote is not a string's end
        utf8 = utf8.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Two quotes side by side are an empty string or the seam between two: dropping them leaves the rest paired.
    nesting = utf8.translate(_NESTING, _NOT_NESTING).replace(b'""', b"")
    if b'"' in nesting:
        nesting = b"".join(nesting.split(b'"')[::2])
    for _ in range(8):
        if not nesting:
            return False
        nesting = nesting.replace(b"[]", b"")  # one level, the innermost
    return max(accumulate(memoryview(nesting.translate(_SIGNED)).cast("b")), default=0) > MAX_DEPTH - 8


_TOKEN: Final = re.compile(r'[\[\]{}]|("[^"\\]*(?:\\.[^"\\]*)*")(\s*:)?')
_ID_VALUE: Final = re.compile(r'\s*(-?(?:0|[1-9][0-9]{0,99})|"[^"\\]*(?:\\.[^"\\]*)*")\s*[,}]')


def _shallow_id(text: str) -> RequestId | None:
    """The ``"id"`` of a response too deep to parse, read from the top level of its object: found once
    both ``"id"`` and ``"result"`` (or ``"error"``) are seen there, and no ``"method"``. ``None`` otherwise."""
    depth = 0
    keys = _TopKeys(text)
    for match in _TOKEN.finditer(text):
        key = match.group(1)
        if key is None:
            token = match.group()
            if depth == 0 and token != "{":
                return None  # a batch, or not JSON
            depth += 1 if token in "[{" else -1
        elif depth == 1 and match.group(2) is not None:
            verdict = keys.see(key, match.end())
            if verdict is not _Read.ON:
                return verdict
    return None


class _Read(enum.Enum):
    ON = "on"  # _TopKeys.see: neither found nor given up


class _TopKeys:
    """The keys of a response object's top level, as :func:`_shallow_id` meets them."""

    __slots__ = ("answer", "found", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: RequestId | None = None
        self.answer = False

    def see(self, key: str, end: int) -> RequestId | Literal[_Read.ON] | None:
        """The id once it and a result (or error) are seen; None to give up (a request, an id not read);
        else ``_Read.ON``. ``end``: where the key's colon ends, its value starts."""
        if key == '"method"':
            return None
        if key in ('"result"', '"error"'):
            self.answer = True
        elif key == '"id"' and self.found is None:
            value = _ID_VALUE.match(self.text, end)
            if value is None:
                return None
            self.found = json.loads(value.group(1))
        if self.answer and self.found is not None:
            return self.found
        return _Read.ON


def _utf8(data: bytes | str, text: str, encoding: str) -> bytes:
    if isinstance(data, bytes) and encoding == "utf-8":
        return data
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes | str) -> list[Message | InvalidMessage]:
    """Decode one frame: a message, or an array of them (a batch). Never raises for bad input: each
    invalid part comes back as an ``InvalidMessage`` naming what is wrong (see the module docstring for
    what valid JSON is refused)."""
    raw = data.encode(errors="surrogatepass") if isinstance(data, str) else data
    text = ""  # read by _unreadable only once decoded
    try:
        encoding = "utf-8" if isinstance(data, str) else json.detect_encoding(data)
        text = data if isinstance(data, str) else data.decode(encoding, "surrogatepass")
        obj = _strict(text)
    except ValueError as exc:  # _NotANumber, UnicodeDecodeError and JSONDecodeError among them
        return [_unreadable(raw, text, exc)]
    except RecursionError:
        return [InvalidMessage(raw, f"JSON nested deeper than {MAX_DEPTH} levels", _shallow_id(text))]
    if _too_deep(_utf8(data, text, encoding)):
        return [InvalidMessage(raw, f"JSON nested deeper than {MAX_DEPTH} levels", _salvage_id(obj))]
    items = obj if type(obj) is list else [obj]
    if not items:
        return [InvalidMessage(raw, "empty batch")]
    return _decode_items(raw, items)


def _decode_items(raw: bytes, items: list[Any]) -> list[Message | InvalidMessage]:
    """Each parsed item as a message, or as the ``InvalidMessage`` saying why it is none."""
    out: list[Message | InvalidMessage] = []
    for item in items:
        try:
            out.append(decode_object(item))
        except MalformedMessage as exc:
            out.append(InvalidMessage(raw, str(exc), _salvage_id(item)))
    return out


def _unreadable(raw: bytes, text: str, exc: ValueError) -> InvalidMessage:
    """A frame the strict decoder refused: not JSON, or (NaN, Infinity, an integer too long to convert) JSON
    whose id the lenient decoder can still read, so that the call it answers fails at once."""
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return InvalidMessage(raw, f"not JSON: {exc}")
    limit = sys.get_int_max_str_digits()
    error = str(exc) if isinstance(exc, _NotANumber) else f"an integer longer than {limit:,} digits"
    try:
        rid = _salvage_id(_lenient(text))
    except (ValueError, RecursionError):
        rid = None
    return InvalidMessage(raw, error, rid)


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
