"""The plain view and the words both views use, on recorded journals (tests/snapshots/)."""

from __future__ import annotations

import io
import subprocess
import sys
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.engine.core.events import Entry
from runner.engine.core.state import RunState
from runner.view.plain import NullView, PlainView, ViewOptions, make_view, rate_and_eta
from runner.view.text import (
    format_elapsed,
    format_failure,
    format_group,
    format_log,
    github_error,
    group_failures,
    short_key,
)
from tests.report_run import SETTLED
from tests.snapshots import JOURNALS, check, entries
from tests.support import entry, folded

MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "--log-level info": {"log_level": "info"},
    "--no-progress": {"progress": False},
    "--quiet": {"quiet": True},
    "GITHUB_ACTIONS=true": {"github": True},
}


def watch(view: PlainView, items: list[Entry]) -> None:
    """What a run does: the state applies each entry, then the view observes it."""
    for item in items:
        view_state(view).apply(item)
        view.observe(item)


_STATES: dict[int, RunState] = {}


def view_state(view: PlainView) -> RunState:
    return _STATES[id(view)]


def plain_view(out: io.StringIO, **options: Any) -> PlainView:
    state = RunState()
    view = PlainView(out, state, **options)
    _STATES[id(view)] = state
    return view


def plain(name: str, **options: Any) -> str:
    out = io.StringIO()
    view = plain_view(out, **options)
    watch(view, entries(name))
    return out.getvalue()


def lines_of(fields: list[dict[str, Any]], **options: Any) -> list[str]:
    """The view's lines (without their time) for entries made from ``fields``, after ``close``."""
    out = io.StringIO()
    view = plain_view(out, **options)
    watch(view, [entry(f, seq=n) for n, f in enumerate(fields, start=1)])
    view.close()
    return [line.split(" ", 1)[1] if line[:2].isdigit() else line for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("name", JOURNALS)
def test_plain_view_snapshot(name: str) -> None:
    text = "".join(f"## {mode}\n{plain(name, **options)}\n" for mode, options in MODES.items())
    check(text, f"{name}.plain.txt")


def test_plain_view_progress_lines_are_rate_limited_by_event_time() -> None:
    # fanout.jsonl: 40 items over ~25 s of event time: a line at most every 5 s, none once all are done
    lines = [line for line in plain("fanout").splitlines() if ": " in line and " items" in line and "/s" in line]
    assert 3 <= len(lines) <= 5
    assert all("/40 items" in line and "eta" in line for line in lines)
    assert plain("fanout", interval=1000.0).count("/s") == 0
    assert "/s" not in plain("fanout", progress=False)


def test_plain_view_no_progress_keeps_starts_finishes_and_errors() -> None:
    text = plain("failed", progress=False)
    assert "step convert started: 3 items" in text
    assert "error convert[docs/missing.md]: tool error:" in text
    assert "step convert failed: 2/3 succeeded, 1 failed" in text


def test_plain_view_quiet_prints_errors_only() -> None:
    assert plain("succeeded", quiet=True) == ""
    text = plain("failed", quiet=True)
    assert text.splitlines() == [
        "04:04:05 error convert[docs/missing.md]: tool error: Error executing tool convert_markdown: "
        "Markdown file not found: docs/missing.md"
    ]


def test_plain_view_log_level_filters_by_rfc5424_rank() -> None:
    assert "notes.md has no heading" in plain("succeeded")  # warning >= warning
    assert "converted install.md" not in plain("succeeded")  # info < warning
    assert "converted install.md" in plain("succeeded", log_level="info")
    assert "no heading" not in plain("succeeded", log_level="error")


def test_github_error_escapes_workflow_command_values() -> None:
    event = {"step": "a:b,c", "item": "k", "kind": "tool-error", "error": "100% bad\nsecond line"}
    assert github_error(event) == "::error title=mcp-run step a%3Ab%2Cc::a:b,c[k]: tool error: 100%25 bad second line"
    session = {"type": "session_failed", "server": "docs", "kind": "connect", "error": "refused"}
    assert github_error(session) == "::error title=mcp-run server docs::connect: refused"


def test_failure_and_log_lines_name_step_and_item() -> None:
    failure = {"step": "convert", "item": "/a/very/long/path/to/some/file.md", "kind": "tool-error", "error": "x"}
    assert format_failure(failure) == "error convert[/a/very/long/path/to/some/file.md]: tool error: x"
    longer = {**failure, "item": "/an/even/longer/path/that/a/key/template/gave/file.md"}
    assert format_failure(longer) == "error convert[…r/path/that/a/key/template/gave/file.md]: tool error: x"
    doubt = {"step": "s", "item": "", "kind": "timeout", "error": "no answer"}
    assert format_failure(doubt) == "in doubt s: timed out: no answer"
    log = {"server": "docs", "level": "warning", "logger": "conv", "step": "convert", "item": "a.md", "data": "hm"}
    assert format_log(log) == "log warning docs (conv) convert[a.md]: hm"
    assert format_log({"server": "docs", "level": "error", "data": {"n": 1}}) == 'log error docs: {"n": 1}'


def test_short_key_and_durations() -> None:
    assert short_key("abc") == "abc"
    assert short_key("x" * 30, 10) == "…xxxxxxxxx"
    assert [format_elapsed(s) for s in (0.42, 12.4, 185, 7620)] == ["0.4s", "12s", "3m05s", "2h07m"]


# -- rates -------------------------------------------------------------------------------------------------


def test_rate_and_eta_count_only_this_attempts_work() -> None:
    start = "2026-01-01T00:00:00.000Z"
    state = folded([{"type": "step_started", "step": "s", "items": 10, "ts": start}])
    step = state.steps["s"]
    base = 1767225600.0  # 2026-01-01T00:00:00Z
    assert rate_and_eta(step, base + 4) == (None, None)
    for key in "abcd":
        state.apply(entry({"type": "item_succeeded", "step": "s", "item": key}))
    assert rate_and_eta(step, base + 2) == (2.0, 3.0)
    earlier = [{"type": "item_succeeded", "step": "s", "item": f"old{n}"} for n in range(90)]
    resumed = folded([*earlier, {"type": "step_started", "step": "s", "items": 100, "reused": 90, "ts": start}])
    for n in range(5):
        resumed.apply(entry({"type": "item_dispatched", "step": "s", "item": f"k{n}"}))
        resumed.apply(entry({"type": "item_succeeded", "step": "s", "item": f"k{n}"}))
    rate, eta = rate_and_eta(resumed.steps["s"], base + 10)
    assert rate == pytest.approx(0.5) and eta == pytest.approx(10.0)  # 5 new items in 10 s, not 95; 5 left


# -- choosing a view ----------------------------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def opts(**kw: Any) -> ViewOptions:
    return ViewOptions(**kw)


def test_make_view_chooses_by_terminal_and_flags() -> None:
    env = {"TERM": "xterm"}
    state = RunState()
    live = make_view(opts(), ["a"], state, FakeTerminal(), environ=env)
    assert type(live).__name__ == "LiveView"
    for view in (
        make_view(opts(), ["a"], state, io.StringIO(), environ=env),
        make_view(opts(progress=False), ["a"], state, FakeTerminal(), environ=env),
        make_view(opts(quiet=True), ["a"], state, FakeTerminal(), environ=env),
        make_view(opts(), ["a"], state, FakeTerminal(), environ={"TERM": "dumb"}),
    ):
        assert isinstance(view, PlainView)
    assert not isinstance(make_view(opts(), [], state, io.StringIO(), environ={}), NullView)


def test_a_terminal_without_rich_gets_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "runner.view.live", raising=False)
    monkeypatch.setitem(sys.modules, "rich.console", None)  # importing it raises ImportError
    view = make_view(opts(), ["a"], RunState(), FakeTerminal(), environ={"TERM": "xterm"})
    assert isinstance(view, PlainView)


def test_make_view_respects_no_color_and_github() -> None:
    live: Any = make_view(opts(), ["a"], RunState(), FakeTerminal(), environ={"TERM": "xterm", "NO_COLOR": "1"})
    assert live.console.no_color
    out = io.StringIO()
    view = make_view(opts(), ["s"], RunState(), out, environ={"GITHUB_ACTIONS": "true"})
    view.observe(entry({"type": "item_failed", "step": "s", "kind": "tool-error", "error": "e"}))
    assert out.getvalue().splitlines()[-1] == "::error title=mcp-run step s::s: tool error: e"


def test_rich_is_not_imported_without_a_live_view() -> None:
    code = (
        "import sys, io, argparse\n"
        "import runner.cli, runner.view.plain\n"
        "from runner.cli import build_parser\n"
        "build_parser()\n"
        "from runner.engine.core.state import RunState\n"
        "runner.view.plain.make_view(runner.view.plain.ViewOptions(), ['a'], RunState(), io.StringIO())\n"
        "assert 'rich' not in sys.modules and 'runner.view.live' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_resumed_fanout_counts_reused_items_as_done() -> None:
    lines = lines_of([{"type": "step_started", "step": "convert", "items": 100, "reused": 90}])
    assert lines == ["step convert started: 100 items (90 done earlier)"]


def test_a_step_finished_counts_its_reused_and_reconciled_items() -> None:
    assert "step convert succeeded: 4/4 succeeded (1 reused, 1 reconciled)" in lines_of(SETTLED)


def test_the_summary_counts_the_reused_and_the_reconciled() -> None:
    from runner.cli.report import render_summary

    counts = {"total": 4, "succeeded": 4, "failed": 0, "in_doubt": 0, "skipped": 0}
    summary = {
        "status": "succeeded",
        "duration_s": 2.0,
        "steps": {"convert": {"status": "succeeded", **counts, "reused": 1, "reconciled": 1}},
        "failed": [],
        "in_doubt": [],
    }
    assert "4/4 calls done (1 reused, 1 reconciled) in 2.0s" in render_summary(summary)


def test_session_events_read_as_sentences_and_stderr_keeps_its_lines() -> None:
    out = io.StringIO()
    view = plain_view(out)
    fields: list[dict[str, Any]] = [
        {"type": "session_lost", "server": "docs", "error": "docs: server exited with code 1"},
        {"type": "session_retrying", "server": "docs", "attempt": 1, "delay_s": 0.5, "remaining_s": 300, "error": "x"},
        {"type": "session_opened", "server": "docs", "reconnects": 1, "down_s": 12.34},
        {
            "type": "session_failed",
            "server": "docs",
            "kind": "connection-before-send",
            "error": "docs: could not initialize: server exited with code 3\n"
            "  server stderr (last lines):\n    Traceback (most recent call last):\n    ValueError: bad config",
        },
    ]
    watch(view, [entry(f, seq=n) for n, f in enumerate(fields, start=1)])
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines() if line[:2].isdigit()]
    assert lines == [
        "server docs: connection lost: server exited with code 1",
        "server docs: unreachable (x); trying again in 0.5s (gives up in 5m00s)",
        "server docs reconnected after 12s",
        "error server docs: could not initialize: server exited with code 3",
    ]
    assert "\n    Traceback (most recent call last):\n    ValueError: bad config\n" in out.getvalue()


def test_identical_failures_in_a_row_are_shown_once_then_counted() -> None:
    fields: list[dict[str, Any]] = []
    for n in range(16):
        error = f"s: connection lost before tools/call request {n + 10} was sent: s: could not reconnect for 300s"
        fields.append(
            {
                "type": "item_failed",
                "step": "convert",
                "item": f"doc{n}.md",
                "kind": "connection-before-send",
                "error": error,
            }
        )
    fields.append({"type": "item_failed", "step": "convert", "item": "x.md", "kind": "tool-error", "error": "no"})
    assert lines_of(fields) == [
        "error convert[doc0.md]: not sent (no connection): s: connection lost before tools/call request 10 was sent: "
        "s: could not reconnect for 300s",
        "... and 15 more items of convert with the same error (doc1.md, doc2.md, doc3.md, ...)",
        "error convert[x.md]: tool error: no",
    ]


def test_the_summary_groups_identical_failures() -> None:
    failures = [
        {"step": "c", "item": f"k{n}", "kind": "tool-error", "error": f"file k{n} not found (request {n + 10})"}
        for n in range(5)
    ] + [
        {"step": "c", "item": "z", "kind": "tool-error", "error": "server exited with code 1"},
        {"step": "c", "item": "y", "kind": "tool-error", "error": "server exited with code 137"},
    ]
    groups = group_failures(failures)
    assert [format_group(g) for g in groups] == [
        "failed c (5 items: k0, k1, k2, ...): tool error: file k0 not found (request 10)",
        "failed c[z]: tool error: server exited with code 1",  # other numbers keep errors apart
        "failed c[y]: tool error: server exited with code 137",
    ]


def test_calls_made_again_are_shown_once_then_counted_and_undelivered_attempts_not_at_all() -> None:
    base = {"type": "item_failed", "step": "convert", "kind": "outcome-unknown", "retrying": True}
    error = "the session expired while the call was in flight"
    fields = [
        {**base, "item": item, "error": error, "retry_in": delay}
        for item, delay in (("a", 0.6), ("b", 0.9), ("c", 0.5))
    ]
    # an attempt surely not delivered: its server's link reports the outage, not each item
    fields.append({**base, "item": "d", "kind": "connection-before-send", "error": "could not connect"})
    assert lines_of(fields) == [
        "retrying convert[a] in 0.6s (safe to repeat): outcome unknown: "
        "the session expired while the call was in flight",
        "... and 2 more of convert called again for the same reason (b, c)",
    ]


def test_a_crashed_servers_stderr_is_shown_once_on_lines_of_its_own() -> None:
    stderr = "\n  server stderr (last lines):\n    Traceback (most recent call last):\n    KeyError: 'x'"
    fields = [
        {"type": "item_failed", "step": "s", "item": item, "kind": "outcome-unknown",
         "error": f"peer: connection lost after tools/call request {ord(item)} was sent: server exited{stderr}"}
        for item in ("a", "b")
    ]  # fmt: skip
    text = "\n".join(lines_of(fields)) + "\n"
    assert text.count("KeyError: 'x'") == 1
    assert "\n    Traceback (most recent call last):\n    KeyError: 'x'\n" in text


@given(
    st.datetimes(min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30)),
    st.sampled_from(["", "Z", "+00:00", "x", "٣"]),
)
def test_an_event_time_reads_as_datetime_reads_it(when: datetime, tail: str) -> None:
    from runner.view import text

    ts = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}" + "Z"
    expected = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    assert text.ts_seconds(ts) == expected  # the fast path: whole second parsed once, then milliseconds
    assert text.ts_seconds(ts) == expected  # and again, from the second it remembers
    odd = ts[:-1] + tail  # not the event log's shape: read the slow way, or not at all
    try:
        slow: float | None = datetime.fromisoformat(odd.replace("Z", "+00:00")).timestamp()
    except ValueError:
        slow = None
    assert text.ts_seconds(odd) == slow


def test_the_connect_line_says_why_auto_chose_the_era() -> None:
    from runner.view.text import format_session

    event = {
        "type": "session_opened",
        "server": "sdk",
        "protocol_version": "2025-11-25",
        "server_info": {"name": "peer", "version": "1"},
        "era": "some calls are not safe to repeat",
    }
    assert format_session(event) == (
        "server sdk connected (peer 1, protocol 2025-11-25); era chosen because some calls are not safe to repeat"
    )
    del event["era"]
    assert format_session(event) == "server sdk connected (peer 1, protocol 2025-11-25)"


def test_task_status_lines_name_the_task_and_say_what_the_live_view_says() -> None:
    """One wording (:func:`runner.engine.core.events.task_words`): a plain step's every change, a fan-out
    item's changes of status (not of message: 40%, 41%... would be thousands of lines)."""
    plain_step = [
        {"type": "step_started", "step": "report"},
        {"type": "item_dispatched", "step": "report"},
        {"type": "task_status", "step": "report", "task_id": "t-1", "status": "working", "message": "40%"},
        {"type": "task_status", "step": "report", "task_id": "t-1", "status": "working", "message": "80%"},
    ]
    fan_out = [
        {"type": "step_started", "step": "convert", "items": 4},
        {"type": "item_dispatched", "step": "convert", "item": "3", "index": 3},
        {"type": "task_status", "step": "convert", "item": "3", "task_id": "t-123", "status": "working",
         "message": "40% ..."},
        {"type": "task_status", "step": "convert", "item": "3", "task_id": "t-123", "status": "working",
         "message": "41% ..."},
        {"type": "task_status", "step": "convert", "item": "3", "task_id": "t-123", "status": "input_required"},
        {"type": "task_status", "step": "convert", "item": "3", "task_id": "t-123", "status": "completed"},
    ]  # fmt: skip
    lines = lines_of(plain_step + fan_out)
    assert [line for line in lines if ": task " in line] == [
        "report: task t-1 working: 40%",
        "report: task t-1 working: 80%",
        "convert[3]: task t-123 working: 40% ...",
        "convert[3]: task t-123 input_required",
        "convert[3]: task t-123 completed",
    ]
    state = folded(plain_step)
    assert state.steps["report"].calls[""].message == "task working: 80%"  # the live view's line
    assert not [line for line in lines_of(plain_step, quiet=True) if "task" in line]
