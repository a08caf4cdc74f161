"""A small HTTP/1.1 client for one MCP endpoint: h11 over trio streams, with a keep-alive pool.

The full client (httpx2) spends most of a call's client CPU building, sending and parsing the request in
layers MCP does not need. ``LeanClient`` does only what the Streamable HTTP transport asks for: a request
to one URL (``http://`` or ``https://``), its response head as soon as it is in, its body streamed.

- **Connections**: at most ``max_connections`` at once (a request waits for a free one, without limit,
  like the full client's pool); idle ones are kept for ``keepalive_expiry`` seconds and reused, newest
  first. One that the server closed or wrote to while idle (its socket is readable) is dropped before use.
  A new connection goes to the address the last one reached (the host name is looked up again when that
  fails), so the many connections of a burst of calls do not each wait for a name lookup in a thread.
- **TLS**: ``trio.SSLStream`` with the full client's own default context (the same trust store and
  ``SSL_CERT_FILE``/``SSL_CERT_DIR`` handling), so verification is the same on both paths.
- **Timeouts**: ``connect_timeout`` covers the TCP connect and the TLS handshake, ``write_timeout`` each
  write; reads wait for ``read_timeout`` (``None``: for ever; the session's call timeout is the bound).
- **Failures** are raised as httpx2's exceptions, so :mod:`.classify` reads them as it reads the full
  client's: could not connect (``ConnectError``, ``ConnectTimeout``: nothing left), a request that could
  not be built (``LocalProtocolError``: nothing left), and, once a byte may have been written, only
  ``WriteError``, ``WriteTimeout``, ``ReadError``, ``ReadTimeout`` or ``RemoteProtocolError``: outcome
  unknown. A request is never sent twice here.

No proxies, no HTTP/2, no compression, no cookies, no redirects: :func:`.wire.make_client` uses this client
only when none of them is needed.
"""

from __future__ import annotations

import os
import select
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Final

import h11
import httpx2
import trio

from runner.protocol.headers import header_value_problem

__all__ = ["LeanClient", "LeanResponse"]

_READ_SIZE: Final = 65536
_USER_AGENT: Final = b"mcp-run"
_HEADS_KEPT: Final = 8
_FRAMING: Final = frozenset({"connection", "content-length", "expect", "host", "te", "transfer-encoding", "upgrade"})


class _Conn:
    """One connection: its stream, its socket (to test and to close without awaiting), its h11 state.
    ``plain``: the stream is the socket's own (no TLS), so a request can be written to the socket directly."""

    __slots__ = ("h11", "idle_since", "plain", "poller", "sock", "stream")

    def __init__(self, stream: trio.abc.Stream, sock: trio.socket.SocketType) -> None:
        self.stream = stream
        self.sock = sock
        self.plain = isinstance(stream, trio.SocketStream)
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self.poller: select.poll | None = None

    def readable(self) -> bool:
        """Whether the idle socket has something to read: the server closed it, or sent what we did not ask."""
        try:
            if self.poller is None:
                self.poller = select.poll()  # not select(): a descriptor past 1023 is fine
                self.poller.register(self.sock.fileno(), select.POLLIN)
            return bool(self.poller.poll(0))
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        """Close the socket at once (no checkpoint: safe while being cancelled)."""
        self.sock.close()


class LeanResponse:
    """A response whose head is in; its body is read by :meth:`aiter_bytes`. :meth:`aclose` gives its
    connection back to the pool when the body was read to its end, and closes it otherwise."""

    __slots__ = ("_client", "_conn", "_done", "headers", "reason_phrase", "status_code")

    def __init__(self, client: LeanClient, conn: _Conn, head: h11.Response) -> None:
        self._client = client
        self._conn: _Conn | None = conn
        self._done = False
        self.status_code: int = head.status_code
        self.reason_phrase: str = head.reason.decode("latin-1")
        headers: dict[str, str] = {}
        for name, value in head.headers:
            key = name.decode("latin-1")
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers: Mapping[str, str] = headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, chunk by chunk, as it arrives."""
        conn = self._conn
        if conn is None or self._done:
            return
        while True:
            event = await self._client.next_event(conn)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._done = True
                return

    def take_body(self) -> bytes | None:
        """The whole body when it came in with the head (a ``content-length`` body already read), the response
        then closed; ``None``, nothing consumed, when some of it is still to come (read it with ``aiter_bytes``)."""
        conn = self._conn
        if conn is None or self._done:
            return None
        length = self.headers.get("content-length", "")
        if not length.isdigit():  # chunked, or read to the end of the connection
            return None
        if len(conn.h11.trailing_data[0]) < int(length):
            return None
        parts: list[bytes] = []
        event: object
        try:
            event = conn.h11.next_event()
            while type(event) is h11.Data:
                parts.append(bytes(event.data))
                event = conn.h11.next_event()
        except h11.RemoteProtocolError as exc:
            event = exc
        self._done = type(event) is h11.EndOfMessage
        self.close()  # back to the pool, or dropped when the body did not end as its length said
        if not self._done:
            raise httpx2.RemoteProtocolError(f"the body did not end as its content-length said: {event!r}")
        return b"".join(parts)

    async def aclose(self) -> None:
        """Release the connection (no checkpoint; idempotent)."""
        self.close()

    def close(self) -> None:
        """:meth:`aclose` without awaiting."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if not self._done:
            self._done = _drain_buffered(conn)
        self._client.release(conn, reusable=self._done)


def _drain_buffered(conn: _Conn) -> bool:
    """Read what h11 already holds without waiting; True when that reaches the end of the body (a 202
    with an empty body, a short body read with its head)."""
    try:
        while True:
            event = conn.h11.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return False
            if type(event) is h11.EndOfMessage:
                return True
    except h11.RemoteProtocolError:
        return False


class _Head:
    """A request head that h11 checked and wrote once, for every request with the same method and headers.

    Its bytes are kept (up to the value of ``Content-Length`` for a request with a body), and h11's state machine
    is moved by two events made once that frame the exchange as the real request does (its method; a body or
    none; no ``Connection``, ``Expect`` or other header that changes how h11 reads it: such a head is not kept).
    h11's events are immutable, so the same two serve every request."""

    __slots__ = ("_events", "_written")

    def __init__(self, request: h11.Request, has_body: bool, authority: bytes, target: bytes) -> None:
        written = h11.Connection(h11.CLIENT).send(request) or b""
        framing = [(b"Host", authority)]
        if has_body:  # Content-Length: 0 was written last
            written = written.removesuffix(b"0\r\n\r\n")
            framing.append((b"Transfer-Encoding", b"chunked"))
        self._written = written
        self._events = (h11.Request(method=request.method, target=target, headers=framing), h11.EndOfMessage())

    def send(self, state: h11.Connection, body: bytes | None) -> bytes:
        """This request's bytes with ``body``; ``state`` moved past them as if h11 had written them."""
        for event in self._events:
            state.send(event)
        if body is None:
            return self._written
        return b"%s%d\r\n\r\n%s" % (self._written, len(body), body)


class LeanClient:
    """Requests to the endpoint ``url``; see the module docstring. Raises httpx2's exceptions."""

    def __init__(
        self,
        url: str,
        *,
        max_connections: int,
        connect_timeout: float,
        write_timeout: float,
        read_timeout: float | None = None,
        keepalive_expiry: float = 4.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = httpx2.URL(url)  # as the full client reads it: the host in IDNA, path and query percent-encoded
        if parts.scheme not in ("http", "https") or not parts.raw_host:
            raise httpx2.UnsupportedProtocol(f"the lean client speaks http:// and https:// only, not {parts.scheme!r}")
        self._tls = parts.scheme == "https"
        self._host = parts.raw_host.decode("ascii")
        self._port = parts.port or (443 if self._tls else 80)
        self._authority = parts.netloc
        self._target = parts.raw_path or b"/"
        self._ssl = ssl_context if ssl_context is not None or not self._tls else httpx2.create_ssl_context()
        self._connect_timeout = connect_timeout
        self._write_timeout = write_timeout
        self._read_timeout = read_timeout
        self._keepalive = keepalive_expiry
        self._slots = trio.Semaphore(max_connections)
        self._idle: list[_Conn] = []
        self._closed = False
        self._address: tuple[int, object] | None = None
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...], bool], _Head] = {}

    async def open(self, method: str, headers: Mapping[str, str], body: bytes | None = None) -> LeanResponse:
        """Send a request and return once its response head is in (1xx skipped), the body unread; the
        caller must ``aclose`` it."""
        if self._closed:
            raise httpx2.ConnectError("the HTTP client is closed")
        try:
            head = self._head(method, headers, body is not None)
            wire = self._encode(method, headers, body) if head is None else ()
        except (h11.LocalProtocolError, UnicodeEncodeError, ValueError) as exc:
            raise httpx2.LocalProtocolError(f"the request cannot be sent: {exc}") from exc
        await self._take_slot()
        conn: _Conn | None = None
        try:
            conn = self._take_idle()
            if conn is None:
                conn = await self._connect()
            try:
                if head is None:
                    data = b"".join(conn.h11.send(part) or b"" for part in wire)
                else:
                    data = head.send(conn.h11, body)
            except h11.LocalProtocolError as exc:
                raise httpx2.LocalProtocolError(f"the request cannot be sent: {exc}") from exc
            await self._write(conn, data)
            return LeanResponse(self, conn, await self._response_head(conn))
        except BaseException:
            if conn is not None:
                conn.close()
            self._slots.release()
            raise

    async def _response_head(self, conn: _Conn) -> h11.Response:
        """The response's head, the informational (1xx) ones before it skipped."""
        while True:
            head = await self.next_event(conn)
            if isinstance(head, h11.Response):
                return head
            if not isinstance(head, h11.InformationalResponse):  # pragma: no cover - h11 gives nothing else
                raise httpx2.RemoteProtocolError(f"unexpected {head!r} before the response head")

    async def next_event(self, conn: _Conn) -> object:
        """The next h11 event of ``conn``'s response, reading as needed; transport failures raised as
        httpx2's read errors."""
        while True:
            try:
                event = conn.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx2.RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                if type(event) is h11.ConnectionClosed:
                    raise httpx2.RemoteProtocolError("the server closed the connection before the response ended")
                return event
            data = await self._read(conn)
            if not data and conn.h11.their_state is h11.SEND_RESPONSE:
                raise httpx2.RemoteProtocolError("the server disconnected without sending a response")
            conn.h11.receive_data(data)

    def release(self, conn: _Conn, *, reusable: bool) -> None:
        """A response is done with ``conn``: keep it for the next request when both sides are done and the
        server sent nothing past the response (bytes that would be read as the next response's head)."""
        self._slots.release()
        state = conn.h11
        if (
            reusable
            and not self._closed
            and state.our_state is state.their_state is h11.DONE
            and not state.trailing_data[0]
        ):
            state.start_next_cycle()
            conn.idle_since = trio.current_time()
            self._idle.append(conn)
        else:
            conn.close()

    async def aclose(self) -> None:
        """Close the idle connections; connections still in use are closed when their responses are."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        await trio.lowlevel.checkpoint()

    # -- inside -------------------------------------------------------------------------------------

    def _head(self, method: str, headers: Mapping[str, str], has_body: bool) -> _Head | None:
        """The head of a request, checked and written by h11 once for each method and set of headers (the same
        on every call of a session, until a token changes; a few are kept, the oldest dropped first). ``None``
        for headers that change how h11 frames the exchange: such a request is written by h11 each time."""
        key = (method, tuple(headers.items()), has_body)
        head = self._heads.get(key)
        if head is None:
            if any(name.lower() in _FRAMING for name in headers):
                return None
            request = self._encode(method, headers, b"" if has_body else None)[0]
            assert isinstance(request, h11.Request)
            head = _Head(request, has_body, self._authority, self._target)
            if len(self._heads) >= _HEADS_KEPT:
                del self._heads[next(iter(self._heads))]
            self._heads[key] = head
        return head

    def _encode(self, method: str, headers: Mapping[str, str], body: bytes | None) -> tuple[h11.Event, ...]:
        fields: list[tuple[bytes, bytes]] = [(b"Host", self._authority), (b"User-Agent", _USER_AGENT)]
        for name, value in headers.items():
            try:
                fields.append((name.encode("ascii"), value.encode("ascii")))
            except UnicodeEncodeError:
                said = header_value_problem(name, value) or f"the header name {name!r} is not ASCII"
                raise ValueError(said) from None
        if body is not None:
            fields.append((b"Content-Length", str(len(body)).encode("ascii")))
            request = h11.Request(method=method.encode("ascii"), target=self._target, headers=fields)
            return (request, h11.Data(data=body), h11.EndOfMessage()) if body else (request, h11.EndOfMessage())
        return (h11.Request(method=method.encode("ascii"), target=self._target, headers=fields), h11.EndOfMessage())

    async def _take_slot(self) -> None:
        """A connection slot: at once when one is free (no task switch: the request's own reads are the waits
        that matter), else waiting for one; cancelled before it is taken, as ``Semaphore.acquire`` is."""
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            await self._slots.acquire()

    def _take_idle(self) -> _Conn | None:
        now = trio.current_time()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < self._keepalive and not conn.readable():
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Conn:
        try:
            with trio.fail_after(self._connect_timeout):
                tcp = await self._open_tcp()
                if self._ssl is None:
                    return _Conn(tcp, tcp.socket)
                tls = trio.SSLStream(tcp, self._ssl, server_hostname=self._host, https_compatible=True)
                try:
                    await tls.do_handshake()
                except BaseException:
                    tcp.socket.close()
                    raise
                return _Conn(tls, tcp.socket)
        except trio.TooSlowError:
            where = f"{self._host}:{self._port}"
            raise httpx2.ConnectTimeout(f"no connection to {where} within {self._connect_timeout} s") from None
        except (OSError, trio.BrokenResourceError) as exc:
            cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
            raise httpx2.ConnectError(str(cause) or type(cause).__name__) from exc

    async def _open_tcp(self) -> trio.SocketStream:
        """A TCP connection to the address the last one reached (no name lookup, which trio does in a
        thread); when there is none or it fails, to the host's name, resolved afresh."""
        cached = self._address
        if cached is not None:
            family, address = cached
            sock = trio.socket.socket(family, trio.socket.SOCK_STREAM)
            try:
                await sock.connect(address)
            except OSError:
                sock.close()
                self._address = None
            except BaseException:
                sock.close()
                raise
            else:
                return trio.SocketStream(sock)
        tcp = await trio.open_tcp_stream(self._host, self._port)
        self._address = (tcp.socket.family, tcp.socket.getpeername())
        return tcp

    async def _write(self, conn: _Conn, data: bytes) -> None:
        """Write ``data`` within ``write_timeout``. On a plain TCP connection it is first written to the socket
        at once: a request fits the socket's buffer, so that is the whole write, without a deadline to keep or a
        task switch (the task is not cancelled before its first byte goes out: that stays as it was)."""
        if conn.plain:
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                sent = os.write(conn.sock.fileno(), data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise httpx2.WriteError(str(exc) or type(exc).__name__) from exc
            if sent == len(data):
                return
            data = data[sent:]
        try:
            with trio.fail_after(self._write_timeout):
                await conn.stream.send_all(data)
        except trio.TooSlowError:
            raise httpx2.WriteTimeout(f"the request was not written within {self._write_timeout} s") from None
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise httpx2.WriteError(str(exc) or type(exc).__name__) from exc

    async def _read(self, conn: _Conn) -> bytes:
        try:
            if self._read_timeout is None:
                return bytes(await conn.stream.receive_some(_READ_SIZE))
            with trio.fail_after(self._read_timeout):
                return bytes(await conn.stream.receive_some(_READ_SIZE))
        except trio.TooSlowError:
            raise httpx2.ReadTimeout(f"nothing read within {self._read_timeout} s") from None
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc
