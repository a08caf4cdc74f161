"""The lean HTTP/1.1 client (``runner.transports.http.lean``) against scripted servers on loopback.

Each server is a trio task speaking raw bytes, so every failure is exact: a malformed status line, a body
cut short, a connection closed before or after the request arrived, a server that never answers. What the
client raises is read through :mod:`runner.transports.http.classify`, the table the transport acts on: a
request whose bytes may have left is never "not delivered".
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import h11
import httpx2
import pytest
import trio
import trio.testing

from runner.errors import OutcomeUnknown
from runner.protocol.jsonrpc import Notification, Request, Response
from runner.transports.base import RequestLost
from runner.transports.http.classify import Action, classify_exception
from runner.transports.http.lean import LeanClient
from runner.transports.http.params import HttpParams
from runner.transports.http.transport import open_http_transport
from runner.transports.http.wire import HttpxClient, make_client, take_body, wants_full_client

Handler = Callable[[trio.abc.Stream], Awaitable[None]]

OK_JSON = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}'


async def read_request(stream: trio.abc.Stream, buffer: bytearray) -> bytes:
    """One request (head and Content-Length body) from ``stream``; ``b""`` when the client closed first.
    ``buffer`` keeps bytes of the next request between calls."""
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return b""
        buffer.extend(chunk)
    head, _, _ = bytes(buffer).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    total = len(head) + 4 + length
    while len(buffer) < total:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return b""
        buffer.extend(chunk)
    request = bytes(buffer[:total])
    del buffer[:total]
    return request


class Server:
    """A loopback server running ``handler`` for each connection; counts connections and requests."""

    def __init__(self, handler: Callable[[Server, trio.abc.Stream], Awaitable[None]]) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.port = 0
        self.tls: ssl.SSLContext | None = None

    async def _serve_one(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        wrapped: trio.abc.Stream = stream
        if self.tls is not None:
            wrapped = trio.SSLStream(stream, self.tls, server_side=True)
        try:
            await self.handler(self, wrapped)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(wrapped)

    async def read(self, stream: trio.abc.Stream, buffer: bytearray) -> bytes:
        """The next request on ``stream`` (recorded), or ``b""`` once the client closed it."""
        request = await read_request(stream, buffer)
        if request:
            self.requests.append(request)
        return request

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}/mcp"


@asynccontextmanager
async def serving(
    handler: Callable[[Server, trio.abc.Stream], Awaitable[None]], tls: ssl.SSLContext | None = None
) -> AsyncIterator[Server]:
    server = Server(handler)
    server.tls = tls
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server._serve_one, 0, host="127.0.0.1"))
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


def client(server: Server, **kwargs: object) -> LeanClient:
    options: dict[str, object] = {"max_connections": 4, "connect_timeout": 5.0, "write_timeout": 5.0}
    options.update(kwargs)
    return LeanClient(server.url, **options)  # type: ignore[arg-type]


async def answer_json(server: Server, stream: trio.abc.Stream) -> None:
    buffer = bytearray()
    while await server.read(stream, buffer):
        await stream.send_all(OK_JSON)


async def body_of(response: object) -> bytes:
    assert hasattr(response, "aiter_bytes")
    return b"".join([chunk async for chunk in response.aiter_bytes()])


# -- what works --------------------------------------------------------------------------------------


async def test_a_post_carries_its_body_and_headers_and_the_response_is_read() -> None:
    async with serving(answer_json) as server:
        http = client(server)
        response = await http.open("POST", {"Accept": "application/json", "Mcp-Session-Id": "s1"}, b'{"id":1}')
        assert (response.status_code, response.reason_phrase) == (200, "OK")
        assert response.headers["content-type"] == "application/json"
        assert await body_of(response) == b'{"ok":true}'
        await response.aclose()
        await http.aclose()
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /mcp HTTP/1.1\r\n")
    assert b"\r\nMcp-Session-Id: s1" in head and b"\r\nContent-Length: 8" in head
    assert f"\r\nHost: 127.0.0.1:{server.port}".encode() in head
    assert body == b'{"id":1}'


async def test_requests_with_the_same_headers_go_out_as_h11_writes_each_of_them() -> None:
    headers = {"Accept": "application/json", "Mcp-Session-Id": "s1"}
    bodies = [b'{"id":1}', b"", b'{"id":12345,"text":"' + b"y" * 300 + b'"}']
    async with serving(answer_json) as server:
        http = client(server)
        for body in bodies:
            response = await http.open("POST", headers, body)
            await response.aclose()
        response = await http.open("DELETE", headers)
        await response.aclose()
        await http.aclose()
    for body, sent in zip([*bodies, None], server.requests, strict=True):
        h11_state = h11.Connection(h11.CLIENT)
        fields = [(b"Host", f"127.0.0.1:{server.port}".encode()), (b"User-Agent", b"mcp-run")]
        fields += [(k.encode(), v.encode()) for k, v in headers.items()]
        if body is None:
            events: list[h11.Event] = [h11.Request(method=b"DELETE", target=b"/mcp", headers=fields)]
        else:
            fields.append((b"Content-Length", b"%d" % len(body)))
            events = [h11.Request(method=b"POST", target=b"/mcp", headers=fields), h11.Data(data=body)]
        assert sent == b"".join(h11_state.send(e) or b"" for e in [*events, h11.EndOfMessage()])
    assert server.connections == 1


async def test_a_request_that_asks_to_close_the_connection_is_not_followed_on_it() -> None:
    async def answer_and_close(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while request := await server.read(stream, buffer):
            await stream.send_all(OK_JSON)
            if b"\r\nConnection: close\r\n" in request:
                return

    async with serving(answer_and_close) as server:
        http = client(server)
        for _ in range(2):
            response = await http.open("POST", {"Connection": "close"}, b"{}")
            assert await body_of(response) == b'{"ok":true}'
            await response.aclose()
        await http.aclose()
    assert (server.connections, len(server.requests)) == (2, 2)


async def test_a_header_value_that_is_not_ascii_is_refused_naming_the_header() -> None:
    http = LeanClient("http://127.0.0.1:9/mcp", max_connections=1, connect_timeout=5.0, write_timeout=5.0)
    with pytest.raises(httpx2.LocalProtocolError) as info:
        await http.open("POST", {"Accept": "application/json", "X-Team": "\u00e9quipe"}, b"{}")
    assert str(info.value) == (
        "the request cannot be sent: the value of header 'X-Team' holds U+00E9 at character 1, which is not ASCII"
    )
    await http.aclose()


async def test_keep_alive_connections_are_reused() -> None:
    async with serving(answer_json) as server:
        http = client(server)
        for i in range(5):
            response = await http.open("POST", {}, b"%d" % i)
            assert await body_of(response) == b'{"ok":true}'
            await response.aclose()
        await http.aclose()
    assert (server.connections, len(server.requests)) == (1, 5)


async def test_a_response_closed_unread_does_not_leave_its_connection_in_the_pool() -> None:
    async def long_body(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 10)

    async with serving(long_body) as server:
        http = client(server)
        for _ in range(2):
            response = await http.open("GET", {})
            await response.aclose()  # 99,990 bytes still to come: the connection cannot carry another request
        await http.aclose()
    assert server.connections == 2


async def test_a_body_that_came_with_its_head_is_taken_at_once_and_its_connection_reused() -> None:
    async with serving(answer_json) as server:
        http = client(server)
        for _ in range(3):
            response = await http.open("POST", {}, b"{}")
            assert take_body(response) == b'{"ok":true}'
            assert take_body(response) is None  # taken, and the response closed
            await response.aclose()
        await http.aclose()
    assert (server.connections, len(server.requests)) == (1, 3)


async def test_a_body_still_to_come_or_chunked_is_not_taken_and_reads_as_before() -> None:
    rest = trio.Event()

    async def slow_then_chunked(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        await server.read(stream, buffer)
        await stream.send_all(b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"ok"')
        await rest.wait()
        await stream.send_all(b":true}")
        await server.read(stream, buffer)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        await server.read(stream, buffer)

    async with serving(slow_then_chunked) as server:
        http = client(server)
        response = await http.open("POST", {}, b"{}")
        assert take_body(response) is None  # 11 bytes said, at most 5 in
        rest.set()
        assert await body_of(response) == b'{"ok":true}'
        await response.aclose()
        response = await http.open("POST", {}, b"{}")
        assert take_body(response) is None  # chunked: its length is not known from the head
        assert await body_of(response) == b"{}"
        await response.aclose()
        await http.aclose()
    assert server.connections == 1


async def test_a_body_larger_than_the_socket_buffer_is_written_whole() -> None:
    big = b"x" * 8_000_000  # far past a loopback socket's send buffer: the direct write is partial

    async with serving(answer_json) as server:
        http = client(server)
        response = await http.open("POST", {}, big)
        assert await body_of(response) == b'{"ok":true}'
        await response.aclose()
        await http.aclose()
    assert server.requests[0].endswith(b"\r\n\r\n" + big)


async def test_a_cancelled_request_writes_nothing() -> None:
    async with serving(answer_json) as server:
        http = client(server)
        response = await http.open("POST", {}, b"{}")  # a connection in the pool
        await response.aclose()
        with trio.CancelScope() as scope:
            scope.cancel()
            await http.open("POST", {}, b"{}")
        await http.aclose()
    assert len(server.requests) == 1


async def test_an_event_stream_is_read_as_it_arrives() -> None:
    more = trio.Event()

    async def sse(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            await stream.send_all(head + b"6\r\ndata: \r\n")
            await more.wait()  # the client has the first chunk before the rest is written
            await stream.send_all(b"3\r\n1\n\n\r\n0\r\n\r\n")

    async with serving(sse) as server:
        http = client(server)
        response = await http.open("POST", {}, b"{}")
        chunks = []
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            more.set()
        await response.aclose()
        # The chunked body ended cleanly: the connection is reused.
        response = await http.open("POST", {}, b"{}")
        await response.aclose()
        await http.aclose()
    assert b"".join(chunks) == b"data: 1\n\n" and chunks[0] == b"data: "
    assert server.connections == 1


async def test_an_empty_202_frees_its_connection_without_reading() -> None:
    async def accepted(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            await stream.send_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")

    async with serving(accepted) as server:
        http = client(server)
        for _ in range(3):
            response = await http.open("POST", {}, b"{}")
            assert response.status_code == 202
            await response.aclose()
        await http.aclose()
    assert server.connections == 1


async def test_requests_beyond_the_pool_wait_for_a_connection() -> None:
    release = trio.Event()

    async def slow(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            await release.wait()
            await stream.send_all(OK_JSON)

    done: list[int] = []
    async with serving(slow) as server:
        http = client(server, max_connections=1)

        async def one(i: int) -> None:
            response = await http.open("POST", {}, b"%d" % i)
            await body_of(response)
            await response.aclose()
            done.append(i)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, 1)
            nursery.start_soon(one, 2)
            await trio.testing.wait_all_tasks_blocked()
            assert len(server.requests) == 1  # the second request waits for the one connection
            release.set()
        await http.aclose()
    assert sorted(done) == [1, 2] and server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    async def one_per_connection(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            await stream.send_all(OK_JSON)
            return  # then close, although the response said nothing about it

    async with serving(one_per_connection) as server:
        http = client(server)
        for _ in range(3):
            response = await http.open("POST", {}, b"{}")
            assert await body_of(response) == b'{"ok":true}'
            await response.aclose()
            await trio.testing.wait_all_tasks_blocked()  # the server has closed its end
        await http.aclose()
    assert (server.connections, len(server.requests)) == (3, 3)


async def test_a_connection_with_bytes_past_its_response_is_not_reused() -> None:
    """A server that writes more than its Content-Length (a stray CRLF after the body, in the same segment):
    those bytes would be read as the head of the next response on that connection, and a call the server
    answered would end in doubt. The connection is dropped instead."""

    async def overlong(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            await stream.send_all(OK_JSON + b"\r\n")

    async with serving(overlong) as server:
        http = client(server)
        for _ in range(2):
            response = await http.open("POST", {}, b"{}")
            assert await body_of(response) == b'{"ok":true}'
            await response.aclose()
        await http.aclose()
    assert (server.connections, len(server.requests)) == (2, 2)


# -- what fails, and what that means -----------------------------------------------------------------


async def failure(handler: Callable[[Server, trio.abc.Stream], Awaitable[None]], **kwargs: object) -> Exception:
    """The exception of one POST (head and body) to a server running ``handler``."""
    async with serving(handler) as server:
        http = client(server, **kwargs)
        with pytest.raises(httpx2.HTTPError) as raised:
            response = await http.open("POST", {}, b'{"id":1}')
            try:
                await body_of(response)
            finally:
                await response.aclose()
        await http.aclose()
    return raised.value


async def test_a_malformed_status_line_is_in_doubt() -> None:
    async def garbage(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            await stream.send_all(b"HTTP/1.1 2OO OK\r\n\r\n")

    error = await failure(garbage)
    assert isinstance(error, httpx2.RemoteProtocolError)
    assert classify_exception(error).action is Action.IN_DOUBT


async def test_a_truncated_chunked_body_is_in_doubt() -> None:
    async def truncated(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly six")
            return

    error = await failure(truncated)
    assert isinstance(error, httpx2.RemoteProtocolError)
    assert classify_exception(error).action is Action.IN_DOUBT


async def test_a_connection_closed_after_the_request_arrived_is_in_doubt() -> None:
    async def hang_up(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            return  # the tool may have run; no response

    error = await failure(hang_up)
    assert isinstance(error, httpx2.RemoteProtocolError)
    assert classify_exception(error).action is Action.IN_DOUBT


async def test_a_connection_reset_before_the_response_is_in_doubt() -> None:
    async def reset(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            assert isinstance(stream, trio.SocketStream)
            stream.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return  # closing with linger 0 sends a RST

    error = await failure(reset)
    assert isinstance(error, httpx2.ReadError | httpx2.RemoteProtocolError)
    assert classify_exception(error).action is Action.IN_DOUBT


async def test_nothing_listening_is_not_delivered() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # the port is free: the connection is refused
    http = LeanClient(f"http://127.0.0.1:{port}/mcp", max_connections=1, connect_timeout=5, write_timeout=5)
    with pytest.raises(httpx2.ConnectError) as raised:
        await http.open("POST", {}, b"{}")
    assert classify_exception(raised.value).action is Action.RETRY
    await http.aclose()


async def test_a_header_that_cannot_be_sent_is_refused_before_connecting() -> None:
    async with serving(answer_json) as server:
        http = client(server)
        for bad in ({"X-Bad": "line\r\nbreak"}, {"X-Bad": "é"}, {"Bad Name": "x"}):
            with pytest.raises(httpx2.LocalProtocolError) as raised:
                await http.open("POST", bad, b"{}")
            assert classify_exception(raised.value).action is Action.MISCONFIGURED
        await http.aclose()
    assert server.connections == 0


@pytest.fixture
def slow_autojump_clock() -> trio.testing.MockClock:
    """Virtual time that jumps once every task has been blocked for 50 ms of real time (the sockets here
    are real: a jump at the first idle instant could beat loopback I/O)."""
    return trio.testing.MockClock(autojump_threshold=0.05)


async def silent(server: Server, stream: trio.abc.Stream) -> None:
    buffer = bytearray()
    while await server.read(stream, buffer):
        await trio.sleep_forever()


async def test_a_server_that_never_answers_times_out(slow_autojump_clock: trio.testing.MockClock) -> None:
    error = await failure(silent, read_timeout=30.0)
    assert isinstance(error, httpx2.ReadTimeout)
    assert classify_exception(error).action is Action.IN_DOUBT
    assert trio.current_time() >= 30.0


async def test_a_wait_for_an_answer_is_cancelled_cleanly_and_frees_its_connection(
    slow_autojump_clock: trio.testing.MockClock,
) -> None:
    async with serving(silent) as server:
        http = client(server, max_connections=1)
        with trio.move_on_after(60) as scope:  # the session's call timeout
            await http.open("POST", {}, b"{}")
        assert scope.cancelled_caught
        with trio.move_on_after(60) as scope:  # the one slot was given back: this gets as far as the server
            await http.open("POST", {}, b"{}")
        assert scope.cancelled_caught
        await http.aclose()
    assert (server.connections, len(server.requests)) == (2, 2)


# -- TLS -----------------------------------------------------------------------------------------------


def _self_signed(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a self-signed certificate for 127.0.0.1, and a client context trusting it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp-run test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    trusting = ssl.create_default_context(cafile=str(cert_file))
    return server, trusting


async def test_https_with_a_trusted_certificate_works_and_an_untrusted_one_is_not_delivered(tmp_path: Path) -> None:
    server_context, trusting = _self_signed(tmp_path)
    async with serving(answer_json, tls=server_context) as server:
        http = client(server, ssl_context=trusting)
        for _ in range(2):
            response = await http.open("POST", {}, b"{}")
            assert await body_of(response) == b'{"ok":true}'
            await response.aclose()
        await http.aclose()
        assert server.connections == 1
        default = client(server)  # the default trust store does not know this certificate
        with pytest.raises(httpx2.ConnectError) as raised:
            await default.open("POST", {}, b"{}")
        assert classify_exception(raised.value).action is Action.RETRY
        await default.aclose()
    assert len(server.requests) == 2


# -- which client -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "full"),
    [
        ({}, False),
        ({"PATH": "/bin", "NO_PROXY": "localhost"}, False),
        ({"HTTPS_PROXY": "http://proxy:3128"}, True),
        ({"http_proxy": "http://proxy:3128"}, True),
        ({"ALL_PROXY": "socks5://proxy"}, True),
        ({"HTTPS_PROXY": " "}, False),
        ({"MCP_RUN_HTTP_CLIENT": "httpx2"}, True),
        ({"MCP_RUN_HTTP_CLIENT": "lean", "HTTPS_PROXY": "http://proxy:3128"}, False),
    ],
)
def test_the_full_client_is_used_when_a_proxy_is_configured_or_asked_for(environ: dict[str, str], full: bool) -> None:
    assert wants_full_client(environ) is full


async def test_make_client_gives_the_lean_client_unless_the_full_one_is_needed() -> None:
    params = HttpParams("http://127.0.0.1:1/mcp")
    lean = make_client(params, {})
    assert isinstance(lean, LeanClient)
    full = make_client(params, {"HTTPS_PROXY": "http://proxy:3128"})
    assert isinstance(full, HttpxClient)
    await full.aclose()
    await lean.aclose()


async def test_new_connections_reuse_the_address_found_by_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    lookups: list[object] = []
    real = trio.open_tcp_stream

    async def counting(host: str | bytes, port: int) -> trio.SocketStream:
        lookups.append(host)
        return await real(host, port)

    monkeypatch.setattr(trio, "open_tcp_stream", counting)
    async with serving(answer_json) as server:
        http = LeanClient(f"http://localhost:{server.port}/mcp", max_connections=4, connect_timeout=5, write_timeout=5)
        responses = [await http.open("POST", {}, b"{}") for _ in range(3)]  # three at once: three connections
        for response in responses:
            assert await body_of(response) == b'{"ok":true}'
            await response.aclose()
        await http.aclose()
    assert (server.connections, lookups) == (3, ["localhost"])


async def test_a_url_with_characters_outside_ascii_is_sent_percent_encoded_as_the_full_client_sends_it() -> None:
    async with serving(answer_json) as server:
        http = LeanClient(
            f"http://127.0.0.1:{server.port}/caf\u00e9 x?q=\u00e9",
            max_connections=1,
            connect_timeout=5,
            write_timeout=5,
        )
        response = await http.open("POST", {}, b"{}")
        assert await body_of(response) == b'{"ok":true}'
        await response.aclose()
        await http.aclose()
    assert server.requests[0].startswith(b"POST /caf%C3%A9%20x?q=%C3%A9 HTTP/1.1\r\n")


def test_an_internationalized_host_name_is_sent_in_its_ascii_form() -> None:
    http = LeanClient("http://b\u00fccher.example:8080/mcp", max_connections=1, connect_timeout=5, write_timeout=5)
    assert (http._host, http._port, http._authority) == ("xn--bcher-kva.example", 8080, b"xn--bcher-kva.example:8080")


# -- through the transport ---------------------------------------------------------------------------


def json_answer(body: bytes) -> Callable[[Server, trio.abc.Stream], Awaitable[None]]:
    async def handler(server: Server, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await server.read(stream, buffer):
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            await stream.send_all(head + body)

    return handler


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}', None),
        (b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * 5000 + b'"}}', "was lost: a JSON response exceeded"),
        (b'{"jsonrpc":"2.0","method":"notifications/progress"}', "the JSON body held no response to 1"),
    ],
    ids=["answered", "too-large", "no-response"],
)
async def test_a_json_answer_read_with_its_head_is_handed_on_as_a_read_one_is(body: bytes, said: str | None) -> None:
    async with (
        serving(json_answer(body)) as server,
        open_http_transport(HttpParams(server.url, open_get_stream=False, max_event_bytes=1000)) as transport,
    ):
        await transport.send(Request(1, "tools/call"))
        event = await transport.receive()
        while isinstance(event, Notification):
            event = await transport.receive()
        if said is None:
            assert isinstance(event, Response) and event.result == {"ok": True}
        else:
            assert isinstance(event, RequestLost) and isinstance(event.error, OutcomeUnknown)
            assert said in str(event.error)
        await transport.send(Request(2, "tools/call"))  # the connection went back to the pool
    assert server.connections == 1
