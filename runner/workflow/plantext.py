"""``mcp-run plan``: a plan as text, layer by layer, each step with its server, tool, fan-out, limits and
retry safety."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from runner.words import plural
from runner.workflow.durations import format_duration
from runner.workflow.plan import DEFAULT_IDLE_TIMEOUT, Plan, PlannedStep
from runner.workflow.template import render_text

__all__ = ["render_plan_text"]


def render_plan_text(plan: Plan, server_notes: Mapping[str, Sequence[str]] | None = None) -> str:
    """The text ``mcp-run plan FILE`` prints: servers, then each layer's steps, then outputs. ``server_notes``
    are lines shown under a server (the CLI's: where a stdio server starts, which this pure module cannot
    know)."""
    title = plan.workflow.name or plan.file or "workflow"
    lines = [f"{title}: {plural(len(plan.order), 'step')} in {plural(len(plan.layers), 'layer')}"]
    lines.extend(_server_lines(plan, server_notes or {}))
    lines.extend(_input_lines(plan))
    width = max((len(step_id) for step_id in plan.order), default=0)
    for n, layer in enumerate(plan.layers, start=1):
        lines.append(f"layer {n}:")
        for step_id in layer:
            lines.extend(_step_lines(plan, plan.steps[step_id], width))
    if plan.workflow.outputs:
        lines.append("outputs: " + ", ".join(plan.workflow.outputs))
    if plan.env_names:
        lines.append("environment read: " + ", ".join(sorted(plan.env_names)))
    return "\n".join(lines) + "\n"


def _server_lines(plan: Plan, server_notes: Mapping[str, Sequence[str]]) -> list[str]:
    if not plan.servers:
        return []
    lines = ["servers:"]
    for name, planned in plan.servers.items():
        server = planned.server
        where = shlex.join(server.command) if server.command is not None else f"{server.url}"
        extra = f"max_concurrency {server.max_concurrency}"
        if server.trust_annotations:
            extra += ", trusts tool annotations"
        lines.append(f"  {name}: {planned.transport} {where} ({extra})")
        lines.extend(f"      {note}" for note in server_notes.get(name, ()))
    return lines


def _input_lines(plan: Plan) -> list[str]:
    if not plan.workflow.inputs:
        return []
    lines = ["inputs:"]
    for name, declared in plan.workflow.inputs.items():
        detail = declared.type + (", required" if declared.is_required else "")
        if declared.secret:
            detail += ", secret"
        elif declared.has_default:
            detail += f", default {render_text(declared.default) or 'null'}"
        lines.append(f"  {name} ({detail})")
    return lines


def _step_lines(plan: Plan, step: PlannedStep, width: int) -> list[str]:
    head = f"  {step.id:<{width}}  {step.server}/{step.tool}"
    details: list[str] = []
    if step.for_each is not None:
        source = step.step.for_each
        shown = source if isinstance(source, str) else f"{len(source)} listed items"
        fan = f"fan-out over {shown}"
        if step.concurrency is not None:
            fan += f", concurrency {step.concurrency}"
        details.append(fan)
    if step.dependencies:
        details.append("needs " + ", ".join(step.dependencies))
    if step.condition is not None:
        details.append(f"if {step.step.if_}")
    details.extend(_timeout_details(step))
    details.append(_retry_detail(plan, step))
    if step.continue_on_error:
        details.append("continues on error")
    pad = " " * (width + 4)
    return [head, *(pad + detail for detail in details)]


def _timeout_details(step: PlannedStep) -> list[str]:
    details = [f"timeout {format_duration(step.timeout)}"] if step.timeout is not None else []
    if step.idle_timeout is None:
        details.append("no idle timeout")
    elif step.idle_timeout != DEFAULT_IDLE_TIMEOUT:
        details.append(f"idle timeout {format_duration(step.idle_timeout)}")
    return details


def _retry_detail(plan: Plan, step: PlannedStep) -> str:
    """Whether a call whose outcome is unknown is sent again: the step's word, else the server's annotations."""
    if step.idempotent:
        return "idempotent: retried when the outcome is unknown"
    planned = plan.servers.get(step.server)
    if planned is not None and planned.server.trust_annotations:
        return "not marked idempotent: retried only if the server's annotations say so"
    return "not idempotent: never re-sent when the outcome is unknown"
