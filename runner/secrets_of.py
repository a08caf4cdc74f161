"""What a run must never write in clear, gathered from its plan: the secrets the
:class:`~runner.masking.Masker` is built with.

A secret is a header value, an environment variable the workflow reads or a stdio server is passed
(``env_passthrough``), an input marked ``secret: true``, what an ``auth:`` block refers to, and every token
OAuth obtains during the run (:func:`oauth_secret_sink`). Each is registered under a placeholder name
(``env.TOKEN``, ``inputs.pw``, ``servers.api.headers.Authorization``) that the journal shows instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from runner.auth.fromworkflow import auth_secrets
from runner.launch import passed_through
from runner.masking import Masker, check_secret_inputs
from runner.workflow.context import make_context
from runner.workflow.plan import Plan
from runner.workflow.servers import HttpServer, StdioServer

__all__ = ["collect_secrets", "oauth_secret_sink"]


def oauth_secret_sink(masker: Masker) -> Callable[[str], None]:
    """Registers each token (or assertion) OAuth obtains with ``masker``, each under its own name."""
    count = itertools.count(1)

    def add(value: str) -> None:
        masker.add(f"oauth.secret{next(count)}", value)

    return add


def collect_secrets(plan: Plan, inputs: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, str]:
    """Placeholder name -> value of everything never to be written: header values, referenced environment
    variables, the variables stdio servers get through ``env_passthrough``, and inputs marked ``secret: true``
    (strings: a secret input is of type string). Raises
    :class:`~runner.errors.UsageError` for a secret input too short to be masked inside text
    (:func:`~runner.masking.check_secret_inputs`)."""
    # an empty env value is never masked, but its placeholder reads back as "" (Temporal)
    secrets = {f"env.{name}": value for name, value in env.items() if value is not None}
    secrets.update(_passed_through(plan))
    for name, spec in plan.workflow.inputs.items():
        value = inputs.get(name)
        if spec.secret and isinstance(value, str):
            secrets[f"inputs.{name}"] = value
    context = make_context(inputs=inputs, env=env, steps={})
    for name, ps in plan.servers.items():
        if isinstance(ps.connection, HttpServer):
            secrets.update(_http_secrets(name, ps.connection, context))
    check_secret_inputs(secrets)
    return secrets


def _passed_through(plan: Plan) -> dict[str, str]:
    """The (non-empty) variables of mcp-run's environment that stdio servers get through ``env_passthrough``."""
    found: dict[str, str] = {}
    for ps in plan.servers.values():
        if isinstance(ps.connection, StdioServer):
            found.update((f"env.{k}", v) for k, v in passed_through(ps.connection.env_passthrough).items() if v)
    return found


def _http_secrets(name: str, connection: HttpServer, context: Mapping[str, Any]) -> dict[str, str]:
    """An HTTP server's secrets: what its ``auth:`` refers to, and its (non-empty) header values as rendered."""
    found: dict[str, str] = {}
    if connection.auth is not None:
        found.update((f"servers.{name}.auth.{key}", v) for key, v in auth_secrets(connection.auth).items())
    rendered = connection.headers.render(context) if connection.headers is not None else None
    found.update((f"servers.{name}.headers.{h}", str(v)) for h, v in (rendered or {}).items() if v)
    return found
