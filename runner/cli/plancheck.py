"""``mcp-run plan --check``: connect to every server, list its tools, and check the plan against them."""

from __future__ import annotations

from typing import Any

from runner.errors import McpRunError, TransportError
from runner.exitcodes import ExitCode, combine
from runner.words import plural
from runner.workflow.plan import DEFAULT_CONNECT_TIMEOUT, Plan

__all__ = ["PlanCheckFailed", "check_plan"]


class PlanCheckFailed(McpRunError):
    """The plan could not be checked against every server: one could not be reached (exit 4, as everywhere
    else) or broke the protocol (exit 3). ``lines`` holds every finding, unreachable servers first; the error
    reads ``cannot check the plan: server NAME: REASON`` followed by the other findings, one per line."""

    def __init__(self, lines: list[str], exit_code: ExitCode) -> None:
        self.lines = lines
        self.exit_code = exit_code
        first, *rest = lines
        super().__init__("\n".join(["cannot check the plan: " + first.removeprefix("error: "), *rest]))


def check_plan(plan: Plan, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> list[str]:
    """Problems and notes, one finding each (a server's stderr tail on lines of its own); findings that start
    with ``error`` make the check fail (exit 2).

    Checked: every step's tool exists; arguments known before the run (no template reads a step's
    result or the item) validate against the tool's ``inputSchema``; tools annotated destructive are
    flagged (annotations are hints, shown whether or not the server is trusted).

    Raises :class:`PlanCheckFailed` when a server could not be reached or broke the protocol, unless the
    plan has errors of its own as well (those win: exit 2, as :func:`runner.exitcodes.combine` orders them).
    """
    import jsonschema
    import trio

    from runner._trio import single_error
    from runner.engine.runctl import env_context, make_opener
    from runner.protocol.mcp import Tool
    from runner.session import SessionOptions
    from runner.workflow.context import make_context

    inputs = dict(plan.input_values or {})
    env = env_context(plan)
    opener = make_opener(plan, inputs, env)
    tools: dict[str, dict[str, Tool]] = {}
    failures: dict[str, McpRunError] = {}

    async def list_all() -> None:
        async def one(name: str) -> None:
            try:
                with single_error():
                    timeout = plan.servers[name].server.connect_timeout or connect_timeout
                    options = SessionOptions(name=name, server_log_level=None, initialize_timeout=timeout)
                    async with opener(name, options) as session:
                        tools[name] = {t.name: t for t in await session.list_tools()}
            except McpRunError as exc:
                failures[name] = exc

        async with trio.open_nursery() as nursery:
            for name in plan.servers:
                if any(s.server == name for s in plan.steps.values()):
                    nursery.start_soon(one, name)

    trio.run(list_all)
    lines = [f"error: server {name}: {failures[name]}" for name in plan.servers if name in failures]
    findings: list[str] = []
    context = make_context(inputs=inputs, env=env, steps={})
    for sid in plan.order:
        step = plan.steps[sid]
        found = tools.get(step.server)
        if found is None:
            continue
        tool = found.get(step.tool)
        if tool is None:
            from runner.workflow.template import did_you_mean

            hint = did_you_mean(step.tool, found) or f"the server has: {', '.join(sorted(found)) or 'no tools'}"
            findings.append(f"error: step {sid}: server {step.server} has no tool {step.tool!r}; {hint}")
            continue
        a = tool.annotations
        if a.destructive and not a.read_only:
            findings.append(f"note: step {sid}: {step.tool} is annotated destructive")
        if _static(step.args.references):
            args: Any = step.args.render(context)
            errors = sorted(
                jsonschema.Draft202012Validator(tool.input_schema).iter_errors(args), key=lambda e: list(e.path)
            )
            for error in errors[:5]:
                where = ".".join(str(p) for p in error.path) or "(arguments)"
                findings.append(f"error: step {sid}: args.{where}: {error.message}")
    lines += findings
    if failures:
        # Listing tools has no side effects: a connection lost on the way means unreachable, not in doubt.
        codes = [ExitCode.UNREACHABLE if isinstance(e, TransportError) else e.exit_code for e in failures.values()]
        if any(line.startswith("error") for line in findings):
            codes.append(ExitCode.USAGE)
        code = combine(codes)
        if code != ExitCode.USAGE:
            raise PlanCheckFailed(lines, code)
    if not any(line.startswith("error") for line in lines):
        steps, servers = len(plan.steps), len(tools)
        lines.append(f"ok: {plural(steps, 'step')} checked against {plural(servers, 'server')}")
    return lines


def _static(references: Any) -> bool:
    """Arguments known before the run: no template reads a step's result, the item or the index."""
    return all(ref.root in ("inputs", "env") for ref in references)
