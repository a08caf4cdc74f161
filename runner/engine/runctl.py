"""Run control: how a run opens its servers' sessions (:func:`make_opener`), and the environment its
templates read (:func:`env_context`).

What used to sit here has its own home now: the secrets to mask in :mod:`runner.secrets_of`, step
fingerprints in :mod:`runner.workflow.fingerprints`, a server as a target in :func:`runner.connect.render_target`
and a stdio server's launch in :mod:`runner.launch`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from runner.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE
from runner.workflow.plan import Plan

if TYPE_CHECKING:
    from runner.connect import Target
    from runner.engine.scheduler import SessionOpener
    from runner.session import Session, SessionOptions

__all__ = ["env_context", "make_opener"]


def env_context(plan: Plan) -> dict[str, str | None]:
    """Only the environment variables the workflow refers to (None when unset)."""
    return {name: os.environ.get(name) for name in sorted(plan.env_names)}


def make_opener(
    plan: Plan,
    inputs: Mapping[str, Any],
    env: Mapping[str, Any],
    *,
    connect: Callable[[Target, SessionOptions], AbstractAsyncContextManager[Session]] | None = None,
    legacy: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    redact: Callable[[str], str] | None = None,
    on_secret: Callable[[str], None] | None = None,
) -> SessionOpener:
    """Open a server's session, once: whether and when to try again is the caller's decision (the
    scheduler's :class:`~runner.engine.calls.servers.ServerLink`). ``legacy`` and ``max_message_size``: see
    :func:`runner.connect.render_target`; ``redact``: what a stdio server's stderr tail passes through before it
    goes into an error (the run's :meth:`Masker.mask <runner.masking.Masker.mask>`, so the raw tail is masked
    before it is indented); ``connect``: how a target becomes a session (default
    :func:`runner.connect.open_target`)."""
    from runner.connect import StdioTarget, open_target, render_target  # loads trio: validate needs neither

    open_session = open_target if connect is None else connect

    def opener(name: str, options: SessionOptions) -> AbstractAsyncContextManager[Session]:
        target = render_target(
            plan, name, inputs, env, legacy=legacy, max_message_size=max_message_size, on_secret=on_secret
        )
        if redact is not None and isinstance(target, StdioTarget):
            target = dataclasses.replace(target, redact=redact)
        return open_session(target, options)

    return opener
