"""A run's report as one self-contained HTML page: inline CSS and inline SVG (:mod:`runner.report.svg`), no
script, no external reference of any kind (no link, image, font or URL attribute), so it reads offline and can be
attached to a CI job as it is.

What a person sees first is the verdict: the run's status, its counts, and, when there are any, the items in doubt
with the commands that decide about them, then the failures grouped by error. Below: the steps (DAG and table),
the calls of each server over time, the throughput, the servers and versions, the inputs (as the journal holds
them: secrets masked) and the outputs. Long lists are cut (:data:`LISTED` per group); the JUnit XML lists every
item. Pure.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any, Final

from runner.report.model import FailureGroup, ItemRow, RunReportModel
from runner.report.svg import COLORS, dag_svg, lanes_svg, throughput_svg

__all__ = ["LISTED", "html_page"]

LISTED: Final = 200  # items listed per failure group, and items in doubt; the rest are counted
VALUES_SHOWN: Final = 20_000  # characters of the inputs, and of the outputs, shown; the rest is counted

_CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2127;background:#f5f6f8}
main{max-width:1000px;margin:0 auto;padding:20px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde0e5}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;font-weight:600;font-size:13px}
.meta{color:#59606b}.meta code{color:#1d2127}
.cards{display:flex;gap:10px;flex-wrap:wrap;margin:14px 0}
.card{background:#fff;border:1px solid #dde0e5;border-radius:8px;padding:8px 14px;min-width:100px}
.card b{display:block;font-size:22px}
table{border-collapse:collapse;background:#fff;width:100%}
td,th{border:1px solid #dde0e5;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#fff;border:1px solid #dde0e5;padding:8px;overflow:auto;max-height:400px;white-space:pre-wrap}
details{background:#fff;border:1px solid #dde0e5;border-radius:6px;margin:6px 0;padding:6px 10px}
summary{cursor:pointer;font-weight:600}
.doubt{border-left:4px solid #8e5bd0;background:#fbf8ff;padding:8px 12px}
svg text{font:12px system-ui,sans-serif;fill:#1d2127}svg text.name{font-weight:600}
svg .edge{stroke:#9aa0aa;stroke-width:1.5}svg .axis{stroke:#9aa0aa}
svg .busy{fill:none;stroke:#1d2127;stroke-width:1.2;stroke-dasharray:3 2}
svg .wait{fill:none;stroke-width:1.6;stroke-dasharray:1 2}
svg{background:#fff;border:1px solid #dde0e5;border-radius:6px;max-width:100%;height:auto}
.legend span{display:inline-block;margin-right:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
"""


def _t(value: object) -> str:
    return escape(str(value), quote=True)


def _status_color(status: str) -> str:
    return {
        "succeeded": COLORS["succeeded"],
        "failed": COLORS["failed"],
        "in-doubt": COLORS["in-doubt"],
        "running": COLORS["running"],
    }.get(status, COLORS["skipped"])


def html_page(report: RunReportModel) -> str:
    name = (report.workflow or "").replace("\\", "/").rsplit("/", 1)[-1] or "run"
    sections = [
        _head(report, name),
        _doubt(report),
        _failures(report),
        _steps(report),
        _timeline(report),
        _servers(report),
        _values(report),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>mcp-run report: {_t(name)} {_t(report.status)}</title><style>{_CSS}</style></head>"
        f"<body><main>{''.join(s for s in sections if s)}</main></body></html>\n"
    )


def _head(report: RunReportModel, name: str) -> str:
    counts = report.counts()
    code = f", exit {report.exit_code}" if report.exit_code is not None else ""
    cards: list[tuple[str, object, str]] = [
        ("calls", counts["items"], "#1d2127"),
        ("succeeded", counts["succeeded"], COLORS["succeeded"]),
        ("failed", counts["failed"], COLORS["failed"] if counts["failed"] else "#1d2127"),
        ("in doubt", counts["in_doubt"], COLORS["in-doubt"] if counts["in_doubt"] else "#1d2127"),
        ("duration", f"{report.duration_s:.1f} s", "#1d2127"),
    ]
    if counts["running"]:
        cards.insert(4, ("running", counts["running"], COLORS["running"]))
    return (
        f'<h1>{_t(name)} <span class="badge" style="background:{_status_color(report.status)}">'
        f"{_t(report.status)}</span></h1>"
        f'<div class="meta">run <code>{_t(report.run_id or "-")}</code>{_t(code)} · started '
        f"{_t(report.started_at or '-')} · {report.attempts} attempt(s) · workflow <code>{_t(report.workflow or '-')}"
        "</code></div>"
        '<div class="cards">'
        + "".join(f'<div class="card"><b style="color:{c}">{_t(v)}</b>{_t(k)}</div>' for k, v, c in cards)
        + "</div>"
    )


def _item_name(item: ItemRow | tuple[str, str | None]) -> str:
    step, key = (item.step, item.key) if isinstance(item, ItemRow) else item
    return f"{step} [{key}]" if key else step


def _doubt(report: RunReportModel) -> str:
    if not report.in_doubt:
        return ""
    rows = "".join(
        f"<tr><td>{_t(i.step)}</td><td><code>{_t(i.key or '-')}</code></td><td>{_t(i.server or '-')}</td>"
        f"<td>{_t(i.kind or 'no outcome recorded')}</td><td>{_t(_line(i.error))}</td></tr>"
        for i in report.in_doubt[:LISTED]
    )
    more = _more(len(report.in_doubt))
    decide = ""
    if report.decisions:
        decide = (
            f"<p>Check them on the server, then resume with one of:</p><pre>{_t(chr(10).join(report.decisions))}</pre>"
        )
    return (
        f'<h2>In doubt ({len(report.in_doubt)})</h2><div class="doubt"><p>The server may or may not have run these '
        "calls: nothing is decided until you say.</p>"
        "<table><tr><th>step</th><th>item</th><th>server</th><th>kind</th><th>error</th></tr>"
        f"{rows}</table>{more}{decide}</div>"
    )


def _line(text: str | None, limit: int = 300) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _more(total: int) -> str:
    return f"<p>… and {total - LISTED} more (all of them: mcp-run report --junit)</p>" if total > LISTED else ""


def _failures(report: RunReportModel) -> str:
    if not report.failures:
        return ""
    total = sum(max(len(g.items), 1) for g in report.failures)
    return f"<h2>Failures ({total})</h2>" + "".join(_group(g) for g in report.failures)


def _group(group: FailureGroup) -> str:
    if group.server is not None:
        what = f"server {_t(group.server)}"
        listed = ""
    else:
        what = f"{len(group.items)} call(s)"
        listed = "<ul>" + "".join(f"<li><code>{_t(_item_name(m))}</code></li>" for m in group.items[:LISTED])
        listed += "</ul>" + _more(len(group.items))
    return (
        f"<details open><summary>{_t(group.kind or 'failed')}: {_t(group.error)} ({what})</summary>{listed}</details>"
    )


def _steps(report: RunReportModel) -> str:
    rows = "".join(
        f"<tr><td>{_t(s.id)}</td><td>{_t(s.status)}{': ' + _t(_line(s.reason, 200)) if s.reason else ''}</td>"
        f"<td>{_t(s.server or '-')} / {_t(s.tool or '-')}</td><td class=n>{s.total}</td><td class=n>{s.succeeded}"
        f"</td><td class=n>{s.failed}</td><td class=n>{s.in_doubt}</td><td class=n>{s.reused}</td>"
        f"<td class=n>{s.reconciled}</td>"
        f"<td class=n>{'-' if s.duration_s is None else f'{s.duration_s:.2f} s'}</td></tr>"
        for s in report.steps
    )
    note = "" if report.edges else "<p class=meta>(dependencies unknown: the workflow file is not at hand)</p>"
    return (
        f"<h2>Steps ({len(report.steps)})</h2>{dag_svg(report)}{note}"
        "<table><tr><th>step</th><th>status</th><th>server / tool</th><th>calls</th><th>succeeded</th>"
        f"<th>failed</th><th>in doubt</th><th>reused</th><th>reconciled</th><th>duration</th></tr>{rows}</table>"
    )


def _timeline(report: RunReportModel) -> str:
    if not report.lanes:
        return ""
    legend = "".join(
        f'<span><i style="background:{COLORS[k]}"></i>{_t(k)}</span>'
        for k in ("succeeded", "reconciled", "retried", "failed", "in-doubt")
    )
    return (
        "<h2>Calls per server over time</h2>"
        f'<p class="legend">{legend}<span>- - - calls in flight (average)</span>'
        f'<span style="color:{COLORS["retried"]}">· · · items waiting to be retried (average)</span> · each bar: '
        f"{report.bucket_s:.3g} s</p>{lanes_svg(report)}"
        f"<h2>Throughput and concurrency</h2>{throughput_svg(report)}"
    )


def _servers(report: RunReportModel) -> str:
    rows = "".join(
        f"<tr><td>{_t(s.name)}</td><td>{_t(s.server_name or '-')}</td><td>{_t(s.server_version or '-')}</td>"
        f"<td>{_t(s.protocol_version or '-')}</td><td class=n>{s.reconnects}</td>"
        f"<td class=n>{s.throttled}{f' ({s.paused_s:.1f} s paused)' if s.throttled else ''}</td>"
        f"<td>{_t(_line(s.failed, 200)) if s.failed else ''}</td></tr>"
        for s in report.servers
    )
    return (
        "<h2>Servers and versions</h2>"
        f"<p class=meta>mcp-run {_t(report.mcp_run_version or '-')} · journal format {report.journal_format}</p>"
        "<table><tr><th>server</th><th>name</th><th>version</th><th>protocol</th><th>reconnects</th>"
        f"<th>429/503</th><th>gave up</th></tr>{rows}</table>"
    )


def _values(report: RunReportModel) -> str:
    out = (
        "<h2>Inputs</h2><p class=meta>As the journal holds them: secrets masked.</p>"
        f"<pre>{_shown_json(report.inputs, 'run_started')}</pre>"
    )
    if report.outputs is not None:
        out += f"<h2>Outputs</h2><pre>{_shown_json(report.outputs, 'last')}</pre>"
    return out


def _shown_json(value: Any, record: str) -> str:
    """``value`` as indented JSON, cut at a line end before :data:`VALUES_SHOWN` characters (an input list of
    100,000 paths would otherwise be most of the page), saying how much was left out and where it is whole."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) <= VALUES_SHOWN:
        return _t(text)
    cut = text.rfind("\n", 0, VALUES_SHOWN)
    cut = cut if cut > 0 else VALUES_SHOWN
    left = len(text) - cut
    return _t(
        f"{text[:cut]}\n… {left:,} more characters, left out of this page (whole in the journal's {record} record)"
    )
