"""A run as a short Markdown summary (a table of its steps, its failures grouped, the items in doubt and the
commands that decide about them): what ``mcp-run report --markdown`` writes and what ``mcp-run WORKFLOW`` appends
to ``$GITHUB_STEP_SUMMARY`` in a GitHub Actions job."""

from __future__ import annotations

from typing import Final

from runner.report.model import RunReportModel

__all__ = ["markdown"]

LISTED: Final = 10  # failure groups and items in doubt listed; the rest are counted


def _cell(value: object) -> str:
    """Text safe in a table cell (and in a line): no pipe, no newline, no HTML."""
    text = " ".join(str(value).split())
    for char, escaped in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("`", "'")):
        text = text.replace(char, escaped)
    return text if len(text) <= 200 else text[:197] + "..."


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def markdown(report: RunReportModel) -> str:
    counts = report.counts()
    name = (report.workflow or "").replace("\\", "/").rsplit("/", 1)[-1] or "run"
    lines = [
        f"### mcp-run {_cell(name)}: {report.status}",
        "",
        f"Run `{_cell(report.run_id or '-')}`, {_seconds(report.duration_s)}: {counts['succeeded']} succeeded, "
        f"{counts['failed']} failed, {counts['in_doubt']} in doubt of {counts['items']} calls.",
        "",
        "| step | status | calls | succeeded | failed | in doubt | reused | reconciled | duration |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for step in report.steps:
        status = step.status + (f": {_cell(step.reason)}" if step.reason else "")
        lines.append(
            f"| {_cell(step.id)} | {status} | {step.total} | {step.succeeded} | {step.failed} | {step.in_doubt} "
            f"| {step.reused} | {step.reconciled} | {_seconds(step.duration_s)} |"
        )
    if report.failures:
        lines += ["", f"**Failures** ({sum(max(len(g.items), 1) for g in report.failures)})", ""]
        for group in report.failures[:LISTED]:
            where = f"server {group.server}" if group.server else _members(group.items)
            lines.append(f"- {_cell(group.kind or 'failed')}: {_cell(group.error)} ({_cell(where)})")
        if len(report.failures) > LISTED:
            lines.append(f"- ... and {len(report.failures) - LISTED} more kinds of failure")
    if report.in_doubt:
        lines += ["", f"**In doubt** ({len(report.in_doubt)}): the server may or may not have run these calls", ""]
        lines += [f"- {_cell(item.step)} `{_cell(item.key)}`" for item in report.in_doubt[:LISTED]]
        if len(report.in_doubt) > LISTED:
            lines.append(f"- ... and {len(report.in_doubt) - LISTED} more")
        if report.decisions:
            lines += ["", "Check them on the server, then resume with one of:", "", "```", *report.decisions, "```"]
    return "\n".join(lines) + "\n"


def _members(items: tuple[tuple[str, str | None], ...]) -> str:
    shown = [f"{step} {key}" if key else step for step, key in items[:5]]
    more = f" and {len(items) - 5} more" if len(items) > 5 else ""
    return ", ".join(shown) + more
