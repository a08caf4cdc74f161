"""``mcp-run plan --check``: connect to every server, list its tools, and check the plan against them."""

from __future__ import annotations

from typing import Any

from runner.plan import Plan


def check_plan(plan: Plan) -> list[str]:
    """Problems and notes, one line each; lines that start with ``error`` make the check fail.

    Checked: every step's tool exists; arguments known before the run (no template reads a step's
    result or the item) validate against the tool's ``inputSchema``; tools annotated destructive are
    flagged (annotations are hints, shown whether or not the server is trusted).
    """
    import jsonschema
    import trio

    from runner._trio import single_error
    from runner.context import make_context
    from runner.errors import McpRunError
    from runner.protocol import Tool
    from runner.runctl import env_context, make_opener
    from runner.session import SessionOptions

    inputs = dict(plan.input_values or {})
    env = env_context(plan)
    opener = make_opener(plan, inputs, env)
    tools: dict[str, dict[str, Tool] | str] = {}

    async def list_all() -> None:
        async def one(name: str) -> None:
            try:
                with single_error():
                    async with opener(name, SessionOptions(name=name, server_log_level=None)) as session:
                        tools[name] = {t.name: t for t in await session.list_tools()}
            except McpRunError as exc:
                tools[name] = str(exc).split("\n", 1)[0]

        async with trio.open_nursery() as nursery:
            for name in plan.servers:
                if any(s.server == name for s in plan.steps.values()):
                    nursery.start_soon(one, name)

    trio.run(list_all)
    lines: list[str] = []
    for name, found in tools.items():
        if isinstance(found, str):
            lines.append(f"error: server {name}: {found}")
    context = make_context(inputs=inputs, env=env, steps={})
    for sid in plan.order:
        step = plan.steps[sid]
        found_tools = tools.get(step.server)
        if not isinstance(found_tools, dict):
            continue
        found = found_tools
        tool = found.get(step.tool)
        if tool is None:
            from runner.template import did_you_mean

            hint = did_you_mean(step.tool, found) or f"the server has: {', '.join(sorted(found)) or 'no tools'}"
            lines.append(f"error: step {sid}: server {step.server} has no tool {step.tool!r}; {hint}")
            continue
        a = tool.annotations
        if a.destructive and not a.read_only:
            lines.append(f"note: step {sid}: {step.tool} is annotated destructive")
        if _static(step.args.references):
            args: Any = step.args.render(context)
            errors = sorted(
                jsonschema.Draft202012Validator(tool.input_schema).iter_errors(args), key=lambda e: list(e.path)
            )
            for error in errors[:5]:
                where = ".".join(str(p) for p in error.path) or "(arguments)"
                lines.append(f"error: step {sid}: args.{where}: {error.message}")
    if not any(line.startswith("error") for line in lines):
        lines.append(f"ok: {len(plan.steps)} steps checked against {len(tools)} servers")
    return lines


def _static(references: Any) -> bool:
    """Arguments known before the run: no template reads a step's result, the item or the index."""
    return all(ref.root in ("inputs", "env") for ref in references)
