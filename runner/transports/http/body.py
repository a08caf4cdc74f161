"""Reading HTTP response bodies under trio: the media type, a body pump that stops cleanly, a bounded close.

Shared by the POST side (error bodies) and the stream readers (JSON and SSE bodies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

from runner.transports.http.wire import HttpResponse

__all__ = ["ACCEPT_POST", "ACCEPT_SSE", "aclose_response", "content_type", "pump_body"]

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


async def aclose_response(response: HttpResponse, timeout: float) -> None:
    """Close ``response`` even while being cancelled, bounded in time."""
    with trio.move_on_after(timeout, shield=True):
        await response.aclose()
