"""Run control: everything between a valid plan and the scheduler.

- what must never be written in clear (:func:`collect_secrets`);
- HTTP servers' headers as rendered, checked before the run starts (:func:`check_headers`);
- step fingerprints and the workflow hash, so a resume can tell what changed;
- how to open each server's session (:func:`make_opener`), a stdio server's program, working directory and
  environment resolved (:func:`render_target`, :func:`server_launch`);
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.auth.fromworkflow import auth_config, auth_secrets
from runner.errors import WorkflowError
from runner.jsontext import utf8
from runner.launch import Launch, LaunchError, passed_through, resolve_launch
from runner.masking import Masker, check_secret_inputs
from runner.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE
from runner.workflow.context import make_context
from runner.workflow.literals import ascii_hint, header_value_problem
from runner.workflow.model import Server
from runner.workflow.plan import Plan
from runner.workflow.positions import Loc
from runner.workflow.template import canonical_json

if TYPE_CHECKING:
    from runner.connect import Target
    from runner.engine.scheduler import SessionOpener
    from runner.session import Session, SessionOptions

__all__ = [
    "check_headers",
    "collect_secrets",
    "env_context",
    "fingerprints",
    "launch_loc",
    "make_opener",
    "oauth_secret_sink",
    "render_target",
    "server_launch",
    "stdio_environment",
    "workflow_folder",
    "workflow_hash",
]


def workflow_folder(plan: Plan) -> str:
    """Where a workflow's relative paths start: its file's folder (the current directory for a workflow that
    was not read from a file, such as ``parse_workflow(text)``'s)."""
    if plan.file is None or not os.path.isfile(plan.file):
        return os.getcwd()
    return str(Path(plan.file).resolve().parent)


def oauth_secret_sink(masker: Masker) -> Callable[[str], None]:
    """Registers each token (or assertion) OAuth obtains with ``masker``, each under its own name."""
    count = itertools.count(1)

    def add(value: str) -> None:
        masker.add(f"oauth.secret{next(count)}", value)

    return add


def env_context(plan: Plan) -> dict[str, str | None]:
    """Only the environment variables the workflow refers to (None when unset)."""
    return {name: os.environ.get(name) for name in sorted(plan.env_names)}


def collect_secrets(plan: Plan, inputs: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, str]:
    """Placeholder name -> value of everything never to be written: header values, referenced environment
    variables, the variables stdio servers get through ``env_passthrough``, and inputs marked ``secret: true``
    (strings: a secret input is of type string). Raises
    :class:`~runner.errors.UsageError` for a secret input too short to be masked inside text
    (:func:`~runner.masking.check_secret_inputs`)."""
    secrets: dict[str, str] = {}
    for name, value in env.items():
        if value is not None:  # an empty one is never masked, but its placeholder reads back as "" (Temporal)
            secrets[f"env.{name}"] = value
    for ps in plan.servers.values():
        for name, value in passed_through(ps.server.env_passthrough or ()).items():
            if value:
                secrets[f"env.{name}"] = value
    for name, spec in plan.workflow.inputs.items():
        value = inputs.get(name)
        if spec.secret and isinstance(value, str):
            secrets[f"inputs.{name}"] = value
    context = make_context(inputs=inputs, env=env, steps={})
    for server_name, ps in plan.servers.items():
        if ps.server.auth is not None:
            for key, value in auth_secrets(ps.server.auth).items():
                secrets[f"servers.{server_name}.auth.{key}"] = value
        if ps.headers is not None:
            rendered = ps.headers.render(context) or {}
            for header, value in rendered.items():
                if value:
                    secrets[f"servers.{server_name}.headers.{header}"] = str(value)
    check_secret_inputs(secrets)
    return secrets


def check_headers(plan: Plan, inputs: Mapping[str, Any], env: Mapping[str, Any], only: str | None = None) -> None:
    """Refuse, before anything is sent, a header of an HTTP server (``only``: of that server) that renders to a
    value HTTP cannot carry (not ASCII: an ``env`` or input value in its template): a ``WorkflowError`` at the
    header's line naming the server and the header (and not the value, which may be a secret)."""
    context = make_context(inputs=inputs, env=env, steps={})
    for name, ps in plan.servers.items():
        if ps.headers is None or (only is not None and name != only):
            continue
        for header, value in (ps.headers.render(context) or {}).items():
            problem = header_value_problem(header, "" if value is None else str(value))
            if problem is not None:
                loc: Loc = ("servers", name, "headers", header)
                line, column = plan.positions.locate(loc) if plan.positions is not None else (None, None)
                raise WorkflowError(
                    f"server {name}: {problem} (as rendered from its template)",
                    file=plan.file,
                    line=line,
                    column=column,
                    path=f"servers.{name}.headers.{header}",
                    suggestion=ascii_hint(),
                )


def workflow_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _server_dump_exclude(server: Server) -> set[str]:
    """Fields left out of a fingerprint: ``max_concurrency``, ``transport``, ``tasks`` (a call made as a task or
    not), ``protocol`` (the revision spoken) and ``auth`` (how tokens are obtained) do not change what a step
    does; a field added later (``env_passthrough``, ``elicitation``, ``roots``), when unset, must leave the
    fingerprints of runs started before it as they were."""
    added_later = ("env_passthrough", "elicitation", "roots")
    left_out = {"max_concurrency", "transport", "tasks", "protocol", "auth"}
    return left_out | {name for name in added_later if getattr(server, name) is None}


def fingerprints(plan: Plan, inputs: Mapping[str, Any]) -> dict[str, str]:
    """step -> hash of its definition, its server's definition, the non-secret inputs and its dependencies'
    fingerprints (so a change flows downstream). Linear in steps: a step hashes its dependencies' fingerprints,
    not their definitions, so a chain of 20,000 steps hashes 20,000 definitions, not 200 million."""
    public_inputs = {name: value for name, value in inputs.items() if not plan.workflow.inputs[name].secret}
    inputs_text = utf8(canonical_json(public_inputs))
    servers = {
        name: utf8(canonical_json(ps.server.model_dump(mode="json", exclude=_server_dump_exclude(ps.server))))
        for name, ps in plan.servers.items()
    }
    out: dict[str, str] = {}
    for sid in plan.order:
        ps = plan.steps[sid]
        h = hashlib.sha256()
        h.update(utf8(canonical_json(ps.step.model_dump(mode="json", by_alias=True))))
        h.update(servers[ps.server])  # each server's text once, not once per step
        h.update(inputs_text)
        for dep in ps.dependencies:
            h.update(out[dep].encode())
        out[sid] = h.hexdigest()[:16]
    return out


def render_target(
    plan: Plan,
    name: str,
    inputs: Mapping[str, Any],
    env: Mapping[str, Any],
    *,
    legacy: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    on_secret: Callable[[str], None] | None = None,
) -> Target:
    """Server ``name`` as a connectable target: an HTTP server's URL and headers rendered; a stdio server's
    program and working directory resolved (:mod:`runner.launch`: relative paths from the workflow's folder;
    :class:`~runner.launch.LaunchError` naming the server and its line when it cannot start) and its
    environment chosen (``env_passthrough`` from mcp-run's environment, then ``env``, which wins).

    ``legacy``: the run was begun by an mcp-run whose stdio servers started in the caller's directory
    (journal format 1): they keep starting there, their program found as that version found it, so the
    rest of the run reads and writes where its beginning did.

    ``max_message_size``: the largest message accepted from the server (``--max-message-size``).

    ``on_secret``: told every token an HTTP server's OAuth obtains (the run's masker registers it)."""
    from runner.connect import HttpTarget, StdioTarget  # loads the session and trio: validate needs neither

    ps = plan.servers[name]
    server = ps.server
    context = make_context(inputs=inputs, env=env, steps={})
    if ps.transport == "http":
        assert ps.url is not None
        check_headers(plan, inputs, env, only=name)
        headers = ps.headers.render(context) if ps.headers is not None else {}
        return HttpTarget(
            url=str(ps.url.render(context)),
            headers={k: str(v) for k, v in (headers or {}).items()},
            max_concurrency=server.max_concurrency,
            max_message_size=max_message_size,
            transport=server.transport or "auto",
            auth=auth_config(server.auth) if server.auth is not None else None,
            on_secret=on_secret,
        )
    server_env = stdio_environment(plan, name, inputs, env)
    if legacy:
        assert server.command is not None
        cwd = None if server.cwd is None else os.path.join(workflow_folder(plan), server.cwd)
        return StdioTarget(command=list(server.command), cwd=cwd, env=server_env, max_message_size=max_message_size)
    launch = server_launch(plan, name, server_env.get("PATH"))
    return StdioTarget(command=list(launch.argv), cwd=launch.cwd, env=server_env, max_message_size=max_message_size)


def stdio_environment(plan: Plan, name: str, inputs: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, str]:
    """What stdio server ``name`` gets besides the allow-list: the variables its ``env_passthrough`` names, then
    its ``env`` rendered (which wins)."""
    ps = plan.servers[name]
    rendered = ps.env.render(make_context(inputs=inputs, env=env, steps={})) if ps.env is not None else {}
    return passed_through(ps.server.env_passthrough or ()) | {
        k: "" if v is None else str(v) for k, v in (rendered or {}).items()
    }


def server_launch(plan: Plan, name: str, path: str | None = None) -> Launch:
    """Stdio server ``name``'s program and working directory, resolved; ``path`` is the PATH it gets (None:
    mcp-run's own). Raises :class:`~runner.launch.LaunchError` located at the workflow's line."""
    server = plan.servers[name].server
    assert server.command is not None
    try:
        return resolve_launch(server.command, base=workflow_folder(plan), cwd=server.cwd, path=path)
    except LaunchError as exc:
        raise exc.located(name, _where(plan, launch_loc(plan, name, exc))) from None


def launch_loc(plan: Plan, name: str, error: LaunchError) -> Loc:
    """Where in the workflow the part of server ``name`` that ``error`` is about sits."""
    if error.part == "command":
        return ("servers", name, "command", 0)
    return ("servers", name, "cwd") if plan.servers[name].server.cwd is not None else ("servers", name)


def _where(plan: Plan, loc: Loc) -> str | None:
    if plan.file is None:
        return None
    line, column = plan.positions.locate(loc) if plan.positions is not None else (None, None)
    return plan.file + (f":{line}" if line is not None else "") + (f":{column}" if column is not None else "")


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
    scheduler's :class:`~runner.engine.servers.ServerLink`). ``legacy`` and ``max_message_size``: see
    :func:`render_target`; ``redact``: what a stdio server's stderr tail passes through before it goes into an
    error (the run's :meth:`Masker.mask <runner.masking.Masker.mask>`, so the raw tail is masked before
    it is indented); ``connect``: how a target becomes a session (default :func:`runner.connect.open_target`)."""
    from runner.connect import StdioTarget, open_target  # loads the session and trio: validate needs neither

    open_session = open_target if connect is None else connect

    def opener(name: str, options: SessionOptions) -> AbstractAsyncContextManager[Session]:
        target = render_target(
            plan, name, inputs, env, legacy=legacy, max_message_size=max_message_size, on_secret=on_secret
        )
        if redact is not None and isinstance(target, StdioTarget):
            target = dataclasses.replace(target, redact=redact)
        return open_session(target, options)

    return opener
