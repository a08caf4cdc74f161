"""The client-to-server half of the Streamable HTTP transport: POSTing a message, and the DELETE at close.

A POST's outcome is decided by the table of :mod:`.classify` and raised in the error tree's terms. A 429 to
a request, or a 503 that says when to come back, is ``Throttled`` (not delivered, with the server's
``Retry-After`` or the ``retry_after`` field of its error body): the server's link pauses every call to it
and the caller sends it again, within the server's ``reconnect`` budget (:mod:`runner.engine.calls.pace`).
Such an answer to ``initialize`` or to a notification is sent again here, by a plain loop: after ``Retry-After`` when
the server gave one, else after :func:`runner.backoff.backoff_delay`, within ``send_attempts`` attempts and
``send_max_time`` seconds of trio's clock (a wait that would end past that bound is not started). Nothing
that may have reached the server is ever POSTed again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import httpx2
import trio

from runner.backoff import backoff_delay
from runner.errors import (
    ConnectFailed,
    HTTPStatusError,
    NotDelivered,
    OutcomeUnknown,
    SessionExpired,
    Throttled,
    TransportError,
)
from runner.protocol.jsonrpc import ErrorResponse, decode
from runner.transports.http.authhook import MAX_AUTH_RETRIES, answer_refusal
from runner.transports.http.body import ACCEPT_POST, aclose_response, content_type, read_error_body
from runner.transports.http.classify import (
    Action,
    classify_exception,
    classify_status,
    parse_retry_after,
    retry_after_in_body,
)
from runner.transports.http.connection import Connection, Stream
from runner.transports.http.params import HttpParams
from runner.transports.http.wire import HttpClient, HttpResponse

__all__ = ["Poster"]

log = logging.getLogger(__name__)

_ERROR_BODY_LIMIT: Final = 4096


class _Challenged(Exception):
    """The server answered 401 or 403 and an auth hook is configured: ``error`` is what the caller sees
    when the hook gives up. The request was refused before it ran: sending it again is safe."""

    def __init__(self, error: HTTPStatusError, answer: Mapping[str, str], sent: Mapping[str, str]) -> None:
        super().__init__(str(error))
        self.error = error
        self.answer = answer  # the response's headers
        self.sent = sent  # the request's


class _RateLimited(Exception):
    """The server answered 429: ``error`` is what the caller sees once the retries are spent;
    ``retry_after`` the server's ``Retry-After`` in seconds (``None``: use the backoff)."""

    def __init__(self, error: HTTPStatusError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def _describe_exception(exc: BaseException) -> str:
    """``[Errno 111] Connection refused`` for a connection that could not be made (what precedes it already
    says "could not connect"); ``ReadError: ...`` for the rest, rather than a repr with nested quotes."""
    text = str(exc).strip()
    if text and isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Poster:
    """POSTs and DELETEs on one connection; the session's headers come from ``connection``."""

    def __init__(self, params: HttpParams, client: HttpClient, connection: Connection) -> None:
        self._params = params
        self._client = client
        self._connection = connection
        self._name = params.name

    async def post(
        self, body: bytes, stream: Stream | None, *, initialize: bool, extra: Mapping[str, str] | None = None
    ) -> HttpResponse:
        """POST ``body`` (a request's when ``stream`` is given) and return the 2xx response, its body unread
        (the caller owns it). Raises ``NotDelivered``, ``SessionExpired``, ``HTTPStatusError``,
        ``ConnectFailed`` or ``OutcomeUnknown`` as the table of :mod:`.classify` says; a 429 is retried first
        (see the module docstring)."""
        p = self._params
        deadline = trio.current_time() + p.send_max_time
        attempt = 0
        challenges = 0
        while True:
            try:
                return await self._post_once(body, stream, initialize, extra)
            except _Challenged as challenge:
                # Refused before it ran (401/403): a re-send with a new token is not a duplicate.
                challenges += 1
                assert p.auth is not None
                status = challenge.error.status_code
                if challenges > MAX_AUTH_RETRIES or not await answer_refusal(
                    p.auth, status, challenge.answer, challenge.sent
                ):
                    raise challenge.error from None
                continue
            except _RateLimited as limited:
                delay = limited.retry_after
                if delay is None:
                    delay = backoff_delay(attempt, initial=p.backoff_initial, maximum=p.backoff_max, jitter=p.jitter)
                attempt += 1
                if attempt >= p.send_attempts or trio.current_time() + delay > deadline:
                    raise limited.error from None
            await trio.sleep(delay)

    async def delete_session(self) -> None:
        """End the session on the server (DELETE), bounded by ``close_timeout`` even while cancelled; errors
        are only logged. Nothing is sent without a session."""
        session_id = self._connection.session_id
        if session_id is None:
            return
        headers = self._connection.headers("DELETE", ACCEPT_POST)
        with trio.move_on_after(self._params.close_timeout, shield=True):
            try:
                response = await self._client.open("DELETE", headers)
                await response.aclose()
            except httpx2.HTTPError as exc:
                log.debug("DELETE %s: %r", self._name, exc)
                return
            if response.status_code >= 400 and response.status_code not in (404, 405):
                log.debug("DELETE %s: server answered %d", self._name, response.status_code)
        self._connection.end_session()

    async def _post_once(
        self, body: bytes, stream: Stream | None, initialize: bool, extra: Mapping[str, str] | None
    ) -> HttpResponse:
        """One POST: the response when it is accepted (2xx), else the error the classification table says.
        ``extra``: the request's own headers (2026-07-28 mirrors its body in headers)."""
        headers = self._connection.headers("POST", ACCEPT_POST, initialize=initialize)
        headers["Content-Type"] = "application/json"
        if extra:
            headers.update(extra)
        sent_session = headers.get("Mcp-Session-Id")
        if stream is not None:
            stream.session_id = sent_session
        try:
            response = await self._client.open("POST", headers, body)
        except (httpx2.TransportError, httpx2.InvalidURL) as exc:
            raise self._not_sent_or_lost(exc) from exc
        if 200 <= response.status_code < 300:
            nonce = response.headers.get("dpop-nonce")
            if nonce is not None and self._params.auth is not None:
                self._params.auth.nonce(nonce)  # a DPoP server's next nonce (RFC 9449 section 9)
            return response
        challenge = self._params.auth is not None and response.status_code in (401, 403)
        try:
            detail, rpc_error, hint = await self._error_detail(response)
        finally:
            await aclose_response(response, self._params.close_timeout)
        refused = self._refused(response, detail, stream, sent_session, initialize, hint)
        status_error = refused if isinstance(refused, HTTPStatusError) else refused.__cause__
        if isinstance(status_error, HTTPStatusError):
            status_error.rpc_error = rpc_error
        if challenge and isinstance(refused, HTTPStatusError):
            raise _Challenged(refused, response.headers, headers)
        raise refused

    def _not_sent_or_lost(self, exc: Exception) -> TransportError:
        """What an exception raised while sending means (the table's first rows)."""
        what = f"POST {self._name}"
        action = classify_exception(exc).action
        if action is Action.RETRY:
            return NotDelivered(f"{what}: could not connect: {_describe_exception(exc)}")
        if action is Action.MISCONFIGURED:
            return ConnectFailed(f"{what}: the request could not be sent: {exc!r}")
        return OutcomeUnknown(f"{what}: the connection broke after the request may have been sent: {exc!r}")

    def _refused(
        self,
        response: HttpResponse,
        detail: str,
        stream: Stream | None,
        sent_session: str | None,
        initialize: bool,
        hint: float | None = None,
    ) -> Exception:
        """What a status other than 2xx means (the table's other rows); its cause is the ``HTTPStatusError``.
        ``hint``: the wait an error body asked for (``retry_after``), read when no ``Retry-After`` says."""
        what, status = f"POST {self._name}", response.status_code
        error = HTTPStatusError(
            f"{what}: server answered {status} {response.reason_phrase}{detail}",
            status_code=status,
            location=response.headers.get("location"),
        )
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if retry_after is None:
            retry_after = hint
        action = classify_status(
            status, carried_session=sent_session is not None, body=detail, asked_to_wait=retry_after is not None
        ).action
        result: Exception = error
        if action is Action.SESSION_EXPIRED:
            assert sent_session is not None
            if stream is not None:
                self._connection.forget(stream)  # reported by SessionExpired, not by RequestLost
            self._connection.expire(sent_session)
            result = SessionExpired(f"{what}: the server no longer knows our session ({status}{detail})")
        elif action is Action.RETRY_AFTER and stream is not None and not initialize:
            # Refused before it ran (a rate limiter, an overloaded server that sheds load and says when to come
            # back): not delivered.
            result = Throttled(
                f"{what}: server answered {status} {response.reason_phrase}{detail}",
                status_code=status,
                retry_after=retry_after,
            )
        elif action is Action.RETRY_AFTER:
            return _RateLimited(error, retry_after)
        elif action is Action.IN_DOUBT and stream is not None and not initialize:
            result = OutcomeUnknown(f"{what}: server answered {status} before any event: the call may have run{detail}")
        elif 300 <= status < 400:
            return HTTPStatusError(
                f"{what}: server redirected ({status}) to {error.location or '(no Location)'}; redirects are "
                "not followed: configure the final URL",
                status_code=status,
                location=error.location,
            )
        else:
            return error
        result.__cause__ = error
        return result

    async def _error_detail(self, response: HttpResponse) -> tuple[str, tuple[int, str, Any] | None, float | None]:
        """A short description of an error body (a JSON-RPC error's message when there is one), that error's
        (code, message, data), and the seconds it asks to wait (``retry_after``: :func:`.retry_after_in_body`)."""
        data = await read_error_body(response, _ERROR_BODY_LIMIT, self._params.close_timeout)
        if not data.strip():
            return "", None, None
        is_json = content_type(response) == "application/json"
        hint = retry_after_in_body(bytes(data)) if is_json and response.status_code in (429, 503) else None
        items = decode(bytes(data)) if is_json else []
        if len(items) == 1 and isinstance(items[0], ErrorResponse):
            item = items[0]
            return f": {item.message} ({item.code})", (item.code, item.message, item.data), hint
        text = data[:200].decode("utf-8", errors="replace").strip()
        return f": {text}", None, hint
