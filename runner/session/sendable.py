"""A request written once, before anything is done about it: ``InvalidCall`` when it cannot be.

A journaled call's dispatch is recorded before its request is written; a request that then could not be
written would leave a dispatch that never went out. So the session writes a journaled request's bytes first
(:func:`runner.protocol.jsonrpc.encoded`), and the transport sends those very bytes: one encode per call, and
arguments JSON cannot carry (``NaN``, an integer too long to write, an object that is not JSON) fail the call as
surely not sent, before its dispatch is journaled.
"""

from __future__ import annotations

from runner.errors import InvalidCall
from runner.protocol.jsonrpc import Request, encoded

__all__ = ["sendable"]


def sendable(request: Request) -> Request:
    """``request`` with its bytes written; ``InvalidCall`` (naming the tool of a ``tools/call``) when they cannot be."""
    try:
        return encoded(request)
    except (ValueError, TypeError, RecursionError) as exc:
        params = request.params or {}
        name = params.get("name") if request.method == "tools/call" else None
        what = f"{name}: the arguments" if isinstance(name, str) else f"{request.method}: the parameters"
        raise InvalidCall(f"{what} cannot be sent as JSON: {_why(exc)}") from None


def _why(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    text = str(exc)
    if "Exceeds the limit" in text:
        return "an integer is too long"
    return text
