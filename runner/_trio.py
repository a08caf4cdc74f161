"""Small trio helpers shared by the layers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["single_error"]


@contextmanager
def single_error() -> Iterator[None]:
    """Re-raise an exception group holding exactly one exception as that exception.

    trio nurseries wrap whatever escapes them in a group; a caller of ``open_session`` wants the
    ``ConnectFailed`` itself, not a group around it. Groups of several stay groups.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from inner.__cause__
