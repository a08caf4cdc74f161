"""Reading HTTP response bodies under trio: the media type, a body pump that stops cleanly, a bounded close.

Shared by the POST side (error bodies) and the stream readers (JSON and SSE bodies).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Final, Protocol

import httpx2
import trio

from runner.transports.http.wire import HttpResponse

__all__ = [
    "ACCEPT_POST",
    "ACCEPT_SSE",
    "Closeable",
    "aclose_response",
    "aclose_within",
    "content_type",
    "pump_body",
    "read_error_body",
]

ACCEPT_POST: Final = "application/json, text/event-stream"
ACCEPT_SSE: Final = "text/event-stream"


def content_type(response: HttpResponse) -> str:
    """The media type of ``response``, lower case, without parameters."""
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


async def pump_body(response: HttpResponse, on_chunk: Callable[[bytes], bool]) -> None:
    """Feed the body of ``response`` to ``on_chunk`` until it ends or ``on_chunk`` returns True.

    httpx2's body iterators are async generators, and one abandoned mid-way is only finalized by the
    garbage collector (trio warns). So reading is stopped by cancelling it at its next checkpoint, which
    lets every generator in the chain finish, never by breaking out of the loop. An exception raised by
    ``on_chunk`` is re-raised once the generators are done.
    """
    error: Exception | None = None
    with trio.CancelScope() as scope:
        async for chunk in response.aiter_bytes():
            if scope.cancel_called:
                continue
            try:
                if on_chunk(chunk):
                    scope.cancel()
            except Exception as exc:  # re-raised below
                error = exc
                scope.cancel()
    if error is not None:
        raise error


class Closeable(Protocol):
    async def aclose(self) -> None: ...


async def aclose_within(closeable: Closeable, timeout: float) -> None:
    """Close ``closeable`` (a response, a client) even while being cancelled, bounded in time."""
    with trio.move_on_after(timeout, shield=True):
        await closeable.aclose()


async def aclose_response(response: HttpResponse, timeout: float) -> None:
    """Close ``response`` even while being cancelled, bounded in time."""
    await aclose_within(response, timeout)


async def read_error_body(response: HttpResponse, limit: int, timeout: float) -> bytes:
    """The first ``limit`` bytes (or a little more: whole chunks) of an error response's body, read for
    ``timeout`` at most; a read error ends it early (the body only describes an error already known)."""
    data = bytearray()

    def on_chunk(chunk: bytes) -> bool:
        data.extend(chunk)
        return len(data) >= limit

    with trio.move_on_after(timeout):
        with suppress(httpx2.HTTPError):
            await pump_body(response, on_chunk)
    return bytes(data)
