"""Run control: everything between a valid plan and the scheduler.

- what must never be written in clear (:func:`collect_secrets`);
- step fingerprints and the workflow hash, so a resume can tell what changed;
- how to open each server's session (:func:`make_opener`);
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from runner.connect import HttpTarget, StdioTarget, Target, open_target
from runner.engine.scheduler import SessionOpener
from runner.session import Session, SessionOptions
from runner.workflow.context import make_context
from runner.workflow.plan import Plan
from runner.workflow.template import canonical_json

__all__ = [
    "collect_secrets",
    "env_context",
    "fingerprints",
    "make_opener",
    "workflow_hash",
]


def env_context(plan: Plan) -> dict[str, str | None]:
    """Only the environment variables the workflow refers to (None when unset)."""
    return {name: os.environ.get(name) for name in sorted(plan.env_names)}


def collect_secrets(plan: Plan, inputs: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, str]:
    """Placeholder name -> value of everything never to be written: header values, referenced environment
    variables, and inputs marked ``secret: true``."""
    secrets: dict[str, str] = {}
    for name, value in env.items():
        if value:
            secrets[f"env.{name}"] = value
    for name, spec in plan.workflow.inputs.items():
        value = inputs.get(name)
        if spec.secret and value is not None:
            secrets[f"inputs.{name}"] = value if isinstance(value, str) else canonical_json(value)
    context = make_context(inputs=inputs, env=env, steps={})
    for server_name, ps in plan.servers.items():
        if ps.headers is not None:
            rendered = ps.headers.render(context) or {}
            for header, value in rendered.items():
                if value:
                    secrets[f"servers.{server_name}.headers.{header}"] = str(value)
    return secrets


_ENV_PLACEHOLDER = re.compile(r"\*\*\*env\.([A-Za-z_][A-Za-z0-9_]*)\*\*\*")


def restore_env_placeholders(value: Any) -> Any:
    """``value`` (a recorded input) with ``***env.NAME***`` placeholders re-expanded from the environment;
    placeholders of unset variables stay (the resume then refuses: the run used a variable now missing)."""
    if isinstance(value, str):
        return _ENV_PLACEHOLDER.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [restore_env_placeholders(v) for v in value]
    if isinstance(value, dict):
        return {k: restore_env_placeholders(v) for k, v in value.items()}
    return value


def workflow_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprints(plan: Plan, inputs: Mapping[str, Any]) -> dict[str, str]:
    """step -> hash of its definition, its server's definition, the non-secret inputs and its upstream
    steps' fingerprints (so a change flows downstream)."""
    public_inputs = {name: value for name, value in inputs.items() if not plan.workflow.inputs[name].secret}
    inputs_text = canonical_json(public_inputs)
    out: dict[str, str] = {}
    for sid in plan.order:
        ps = plan.steps[sid]
        server = plan.servers[ps.server].server
        h = hashlib.sha256()
        h.update(canonical_json(ps.step.model_dump(mode="json", by_alias=True)).encode())
        h.update(canonical_json(server.model_dump(mode="json", exclude={"max_concurrency"})).encode())
        h.update(inputs_text.encode())
        for dep in ps.dependencies:
            h.update(out[dep].encode())
        out[sid] = h.hexdigest()[:16]
    return out


def render_target(plan: Plan, name: str, inputs: Mapping[str, Any], env: Mapping[str, Any]) -> Target:
    ps = plan.servers[name]
    server = ps.server
    context = make_context(inputs=inputs, env=env, steps={})
    if ps.transport == "http":
        assert ps.url is not None
        headers = ps.headers.render(context) if ps.headers is not None else {}
        return HttpTarget(
            url=str(ps.url.render(context)),
            headers={k: str(v) for k, v in (headers or {}).items()},
            max_concurrency=server.max_concurrency,
        )
    env_values = ps.env.render(context) if ps.env is not None else {}
    return StdioTarget(
        command=list(server.command or []),
        cwd=_resolve_cwd(server.cwd, plan.file),
        env={k: "" if v is None else str(v) for k, v in (env_values or {}).items()},
    )


def _resolve_cwd(cwd: str | None, workflow_file: str | None) -> str | None:
    """A relative ``cwd`` is relative to the workflow file, so a workflow runs the same from anywhere."""
    if cwd is None or workflow_file is None or os.path.isabs(cwd):
        return cwd
    return str(Path(workflow_file).resolve().parent / cwd)


def make_opener(
    plan: Plan,
    inputs: Mapping[str, Any],
    env: Mapping[str, Any],
    *,
    connect: Callable[[Target, SessionOptions], AbstractAsyncContextManager[Session]] = open_target,
) -> SessionOpener:
    """Open a server's session, once: whether and when to try again is the caller's decision (the
    scheduler's :class:`~runner.engine.supervisor.ServerLink`)."""

    def opener(name: str, options: SessionOptions) -> AbstractAsyncContextManager[Session]:
        return connect(render_target(plan, name, inputs, env), options)

    return opener
