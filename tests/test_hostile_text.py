"""Text that is not text, and text hostile to terminals, through a whole run on the scheduler: a server whose
results, tool errors and log messages hold lone surrogates and escape sequences. Each item's real outcome is
journaled (the file reads back the very same text), the rest of the batch runs, and what a person sees of
the journal (the plain view, as ``logs`` and a run's stderr show it) holds no control character."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import trio

from runner.engine.core.events import ItemFailed, ItemSucceeded, LogMessage, encode
from runner.engine.core.state import RunState
from runner.engine.journal.reader import parse_journal
from runner.exitcodes import ExitCode
from runner.view.plain import PlainView
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, plan_of, run_plan

ODD = "odd\ud800 \x1b]0;pwned\x07title \x1b[2Jclear \x9b31mred\r\x08"

WORKFLOW = """
version: 1
servers:
  h: {command: [fake]}
inputs:
  keys: {type: string}
steps:
  odd:
    server: h
    tool: odd
    for_each: ${{ split(inputs.keys, ',') }}
    args: {key: "${{ item }}"}
  bad:
    server: h
    tool: bad
    continue_on_error: true
  back:
    server: h
    tool: echo
    needs: [bad]
    args: {text: "${{ steps.odd.results[1].text }}", key: "${{ inputs.keys }}"}
outputs:
  all: ${{ steps.odd.results[*].text }}
"""

KEYS = ["plain", "k\ud800", "k\x1b[2J", "k\x9b"]


def hostile(server: FakeServer) -> None:
    async def odd(call: FakeCall) -> dict[str, Any]:
        await call.log("warning", f"log {call.arguments['key']} {ODD}")
        return text_result(f"{call.arguments['key']} {ODD}")

    async def bad(call: FakeCall) -> dict[str, Any]:
        return text_result(f"bad {ODD}", is_error=True)

    async def echo(call: FakeCall) -> dict[str, Any]:
        return text_result(str(call.arguments["text"]))

    server.tools.update(odd=odd, bad=bad, echo=echo)


async def test_a_run_on_hostile_text_records_every_outcome(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"h": hostile})
    plan = plan_of(WORKFLOW, keys=",".join(KEYS))
    events: list[dict[str, Any]] = []
    path = tmp_path / "journal.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        outcome = await run_plan(plan, harness, events=events, journal_fd=fd)
    finally:
        os.close(fd)

    # every item ran once and succeeded (none in doubt); the tool error failed its step only
    assert outcome.exit_code == ExitCode.OK
    calls = harness.calls("h")
    assert sorted(c.params["arguments"]["key"] for c in calls if c.params["name"] == "odd") == sorted(KEYS)
    assert [c.params["name"] for c in calls].count("echo") == 1
    assert outcome.steps["odd"].status == "succeeded" and outcome.steps["back"].status == "succeeded"
    assert outcome.steps["bad"].status == "failed"
    # the text echoed back reached the server exactly, surrogate and escapes included
    echo = next(c for c in calls if c.params["name"] == "echo")
    assert echo.params["arguments"]["text"] == f"k\ud800 {ODD}"
    assert outcome.outputs["all"] == [f"{key} {ODD}" for key in KEYS]

    # the journal file is UTF-8 and reads back exactly what the run saw
    data = path.read_bytes()
    data.decode("utf-8")
    entries, _ = parse_journal(data)
    assert [encode(e) for e in entries] == events
    texts = [e.event.result["content"][0]["text"] for e in entries if isinstance(e.event, ItemSucceeded)]
    assert sorted(texts) == sorted([f"{key} {ODD}" for key in KEYS] + [f"k\ud800 {ODD}"])  # and the echo
    assert any(isinstance(e.event, LogMessage) and e.event.data == f"log k\x1b[2J {ODD}" for e in entries)
    assert any(isinstance(e.event, ItemFailed) and e.event.error.endswith(ODD) for e in entries)

    # shown as a person sees it: no control character reaches the stream
    shown = io.StringIO()
    state = RunState()
    view = PlainView(shown, state, log_level="debug")
    for entry in entries:
        state.apply(entry)
        view.observe(entry)
    view.close()
    text = shown.getvalue()
    assert not any(ch in text for ch in "\x1b\x9b\r\x07\x08\ud800")
    assert "error bad: tool error: bad odd\\ud800 \\x1b]0;pwned\\x07title \\x1b[2Jclear \\x9b31mred\\r\\x08" in text
    assert "log warning h: log k\\x1b[2J odd\\ud800" in text
