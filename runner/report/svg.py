"""The pictures of a report page, as inline SVG text: the DAG of steps with their counts, the calls of each server
over time (bars per time bucket, by outcome, with the concurrency as a line), and the throughput of the run.

Everything drawn is aggregated (:mod:`runner.report.lanes`): the size of a picture depends on the number of steps,
servers and buckets, never on the number of items. No external reference of any kind. Pure.
"""

from __future__ import annotations

from html import escape
from typing import Final

from runner.report.lanes import Bucket, Lane
from runner.report.model import RunReportModel, StepRow

__all__ = ["COLORS", "dag_svg", "lanes_svg", "throughput_svg"]

COLORS: Final = {
    "succeeded": "#2e9d57",
    "failed": "#d2413a",
    "retried": "#e8a33d",
    "in-doubt": "#8e5bd0",
    "reconciled": "#8fd1a8",  # succeeded's green, lighter: it happened, said by the reconcile tool
    "skipped": "#8a8f98",
    "running": "#3a7bd5",
    "other": "#b8bcc4",
}
_BOX_W: Final = 190
_BOX_H: Final = 62
_GAP_X: Final = 60
_GAP_Y: Final = 18
_WIDTH: Final = 960  # of the time charts
_LANE_H: Final = 70
_LEFT: Final = 130


def _t(text: object) -> str:
    return escape(str(text), quote=True)


def _layers(report: RunReportModel) -> list[list[StepRow]]:
    """The steps in columns: each one right of every step it depends on (journal order without edges)."""
    ids = {step.id for step in report.steps}
    depth: dict[str, int] = {}

    def layer(sid: str, seen: tuple[str, ...] = ()) -> int:
        if sid not in depth:
            deps = [d for d in report.edges.get(sid, ()) if d in ids and d not in seen]
            depth[sid] = 1 + max((layer(d, (*seen, sid)) for d in deps), default=-1)
        return depth[sid]

    columns: list[list[StepRow]] = []
    for step in report.steps:
        n = layer(step.id)
        while len(columns) <= n:
            columns.append([])
        columns[n].append(step)
    return columns


def _step_color(status: str) -> str:
    if status == "succeeded":
        return COLORS["succeeded"]
    if status in ("failed", "incomplete"):
        return COLORS["failed"]
    if status in ("skipped", "not-run"):
        return COLORS["skipped"]
    if status == "running":
        return COLORS["running"]
    return COLORS["in-doubt"] if status in ("unfinished", "interrupted") else COLORS["other"]


def dag_svg(report: RunReportModel) -> str:
    columns = _layers(report)
    if not columns:
        return ""
    rows = max(len(c) for c in columns)
    width = len(columns) * (_BOX_W + _GAP_X) - _GAP_X + 20
    height = rows * (_BOX_H + _GAP_Y) - _GAP_Y + 20
    where: dict[str, tuple[int, int]] = {}
    for x, column in enumerate(columns):
        for y, step in enumerate(column):
            where[step.id] = (10 + x * (_BOX_W + _GAP_X), 10 + y * (_BOX_H + _GAP_Y))
    parts = [f'<svg class="dag" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">']
    for sid, deps in report.edges.items():
        for dep in deps:
            if sid in where and dep in where:
                (x1, y1), (x2, y2) = where[dep], where[sid]
                parts.append(
                    f'<line x1="{x1 + _BOX_W}" y1="{y1 + _BOX_H // 2}" x2="{x2}" y2="{y2 + _BOX_H // 2}" class="edge"/>'
                )
    for column in columns:
        for step in column:
            x, y = where[step.id]
            color = _step_color(step.status)
            counts = f"{step.succeeded} ok"
            counts += f" · {step.failed} failed" if step.failed else ""
            counts += f" · {step.in_doubt} in doubt" if step.in_doubt else ""
            size = f"{step.total} calls" if step.fan_out else "1 call" if step.total else "no call"
            parts.append(
                f"<g><title>{_t(step.id)}: {_t(step.status)}{': ' + _t(step.reason) if step.reason else ''}</title>"
                f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="6" fill="#fff" stroke="{color}" '
                f'stroke-width="2"/><rect x="{x}" y="{y}" width="6" height="{_BOX_H}" rx="3" fill="{color}"/>'
                f'<text x="{x + 14}" y="{y + 18}" class="name">{_t(_cut(step.id, 24))}</text>'
                f'<text x="{x + 14}" y="{y + 35}">{_t(step.status)} · {_t(size)}</text>'
                f'<text x="{x + 14}" y="{y + 52}">{_t(counts)}</text></g>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _reconciled(totals: Bucket) -> str:
    return f" · {totals.reconciled} reconciled" if totals.reconciled else ""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_STACK: Final = (
    ("succeeded", "succeeded"),
    ("reconciled", "reconciled"),
    ("retried", "retried"),
    ("failed", "failed"),
    ("in_doubt", "in-doubt"),
)


def lanes_svg(report: RunReportModel) -> str:
    """One lane per server: a bar per time bucket, stacked by how its calls ended; the dashed line is the average
    number of calls in flight, the dotted one (retried's color) the average number of items waiting to be retried
    (their backoff), drawn for a lane that waited."""
    lanes = report.lanes
    if not lanes:
        return ""
    count = len(lanes[0].buckets)
    step_w = (_WIDTH - _LEFT - 10) / count
    peak = max((b.ended for lane in lanes for b in lane.buckets), default=0) or 1
    busy_peak = max((b.busy for lane in lanes for b in lane.buckets), default=0.0) or 1.0
    wait_peak = max((b.waiting for lane in lanes for b in lane.buckets), default=0.0) or 1.0
    height = len(lanes) * (_LANE_H + 14) + 24
    parts = [f'<svg class="lanes" width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" role="img">']
    for n, lane in enumerate(lanes):
        top = 6 + n * (_LANE_H + 14)
        base = top + _LANE_H
        totals = lane.totals
        parts.append(
            f'<text x="4" y="{top + 16}" class="name">{_t(_cut(lane.server, 16))}</text>'
            f'<text x="4" y="{top + 32}">{lane.calls} calls</text>'
            f'<text x="4" y="{top + 48}">{totals.retried} retried{_waited(lane)}</text>'
            f'<text x="4" y="{top + 64}">{totals.failed} failed · {totals.in_doubt} in doubt'
            f"{_reconciled(totals)}</text>"
            f'<line x1="{_LEFT}" y1="{base}" x2="{_WIDTH - 10}" y2="{base}" class="axis"/>'
        )
        for i, bucket in enumerate(lane.buckets):
            parts.append(_bar(bucket, _LEFT + i * step_w, base, step_w, peak, report.bucket_s))
        points = " ".join(
            f"{_LEFT + (i + 0.5) * step_w:.1f},{base - _LANE_H * b.busy / busy_peak:.1f}"
            for i, b in enumerate(lane.buckets)
        )
        parts.append(f'<polyline points="{points}" class="busy"/>')
        if lane.waits:
            points = " ".join(
                f"{_LEFT + (i + 0.5) * step_w:.1f},{base - _LANE_H * b.waiting / wait_peak:.1f}"
                for i, b in enumerate(lane.buckets)
            )
            parts.append(
                f"<g><title>{lane.waits} retry wait{'s' if lane.waits != 1 else ''}, {totals.waiting:.3g} s in "
                "all</title>"
                f'<polyline points="{points}" class="wait" stroke="{COLORS["retried"]}"/></g>'
            )
    parts.append(_time_axis(report, height - 6))
    parts.append("</svg>")
    return "".join(parts)


def _waited(lane: Lane) -> str:
    return f" · waited {lane.totals.waiting:.3g} s" if lane.waits else ""


def _bar(bucket: Bucket, x: float, base: float, width: float, peak: int, bucket_s: float) -> str:
    if not bucket.ended:
        return ""
    waiting = f"; {bucket.waiting / bucket_s:.1f} waiting to be retried" if bucket.waiting else ""
    out = [f"<g><title>{bucket.ended} calls ended; {bucket.busy / bucket_s:.1f} in flight on average{waiting}</title>"]
    y = base
    for attr, color in _STACK:
        value = getattr(bucket, attr)
        if value:
            h = max(_LANE_H * value / peak, 1.0)
            y -= h
            out.append(
                f'<rect x="{x + 0.5:.1f}" y="{y:.1f}" width="{max(width - 1, 1):.1f}" height="{h:.1f}" '
                f'fill="{COLORS[color]}"/>'
            )
    out.append("</g>")
    return "".join(out)


def _time_axis(report: RunReportModel, y: float) -> str:
    return (
        f'<text x="{_LEFT}" y="{y}">0 s</text>'
        f'<text x="{_WIDTH - 10}" y="{y}" text-anchor="end">{report.duration_s:.1f} s</text>'
    )


def throughput_svg(report: RunReportModel) -> str:
    """Calls ended per second, all servers together, bucket by bucket (bars), and the calls in flight (line)."""
    lanes: tuple[Lane, ...] = report.lanes
    if not lanes:
        return ""
    count = len(lanes[0].buckets)
    ended = [sum(lane.buckets[i].ended for lane in lanes) / report.bucket_s for i in range(count)]
    busy = [sum(lane.buckets[i].busy for lane in lanes) / report.bucket_s for i in range(count)]
    peak, busy_peak = max(ended) or 1.0, max(busy) or 1.0
    height = 140
    base = height - 24
    step_w = (_WIDTH - _LEFT - 10) / count
    parts = [
        f'<svg class="throughput" width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" role="img">',
        f'<text x="4" y="20" class="name">throughput</text><text x="4" y="36">peak {peak:.1f} calls/s</text>',
        f'<text x="4" y="52" class="busy-label">in flight: peak {busy_peak:.1f}</text>',
        f'<line x1="{_LEFT}" y1="{base}" x2="{_WIDTH - 10}" y2="{base}" class="axis"/>',
    ]
    for i, value in enumerate(ended):
        if value:
            h = max((base - 8) * value / peak, 1.0)
            parts.append(
                f'<rect x="{_LEFT + i * step_w + 0.5:.1f}" y="{base - h:.1f}" width="{max(step_w - 1, 1):.1f}" '
                f'height="{h:.1f}" fill="{COLORS["running"]}"><title>{value:.1f} calls/s</title></rect>'
            )
    points = " ".join(
        f"{_LEFT + (i + 0.5) * step_w:.1f},{base - (base - 8) * b / busy_peak:.1f}" for i, b in enumerate(busy)
    )
    parts.append(f'<polyline points="{points}" class="busy"/>')
    parts.append(_time_axis(report, height - 6))
    parts.append("</svg>")
    return "".join(parts)
