"""A value quoted into an error is masked whole before it is cut: no secret shows in part, in any sink.

Every template function that quotes a value it cannot take (``from_json``, ``join``, ``abs``, ``sort_by``,
``matches``, ``extract``) is given a secret environment variable of 1, 3, 41 and 200 characters holding
quotes, backslashes and newlines (and a ``(``: not a regex, not JSON); then every place a template fails (a
call's arguments, ``if:``, ``for_each``, ``key``, an output). The run is the CLI's, in process, on a scripted
fake server. Each sink (the console, ``--json``, the journal, ``show`` and ``show --json``) must quote the
value as its placeholder, and hold no start of the secret in any form (the bug was a value cut to 37
characters, then masked: nothing matched any more).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import runner.engine.run
from runner._trio import single_error
from runner.cli import main
from runner.session import Session, SessionOptions, open_session
from runner.testing.memory import memory_transport_pair
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.test_masking import leaks

ENV = "MCP_RUN_QUOTED_SECRET"
PLACEHOLDER = f"***env.{ENV}***"


def secret_of(length: int) -> str:
    """A secret of ``length`` characters: ``(`` first (not a regex, not JSON), a mark (``§``), a newline
    early (a first line too short to be masked on its own), then quotes and backslashes."""
    return ("(§\n" + "x'y\\\"z-w\n" * 40)[:length]


SECRETS = {length: secret_of(length) for length in (1, 3, 41, 200)}
FUNCTIONS = {
    "from_json": f"from_json(env.{ENV})",
    "join": f"join(',', env.{ENV})",
    "abs": f"abs(env.{ENV})",
    "sort_by": f"sort_by(env.{ENV}, &a)",
    "sort_by (an item)": f"sort_by([{{a: `1`}}, {{a: env.{ENV}}}], &a)",  # JMESPath's own message quotes it
    "matches": f"matches('x', env.{ENV})",
    "extract": f"extract('x', env.{ENV})",
}


@asynccontextmanager
async def fake_opener(name: str, options: SessionOptions) -> AsyncIterator[Session]:
    async def t(call: FakeCall) -> dict[str, Any]:
        return text_result("ok")

    with single_error():
        async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
            server = FakeServer(end)
            server.tools.update(t=t)
            nursery.start_soon(server.serve)
            async with open_session(client, options) as session:
                yield session
            nursery.cancel_scope.cancel()


def workflow_failing_in(place: str, expression: str) -> str:
    template = "${{ " + expression + " }}"
    step = {
        "args": f"  a: {{server: s, tool: t, args: {{v: {json.dumps(template)}}}}}",
        "if": f"  a: {{server: s, tool: t, if: {json.dumps(template)}}}",
        "for_each": f"  a: {{server: s, tool: t, for_each: {json.dumps(template)}}}",
        "key": f"  a: {{server: s, tool: t, for_each: '${{{{ [`1`] }}}}', key: {json.dumps(template)}}}",
        "outputs": "  a: {server: s, tool: t}\noutputs:\n  o: " + json.dumps(template),
    }[place]
    return f"version: 1\nservers:\n  s: {{command: [fake-server]}}\nsteps:\n{step}\n"


def shapes(secret: str) -> list[str]:
    """The start of ``secret`` (all of it when short) as a sink could hold it: raw, JSON-escaped (as is and
    ASCII), and inside Python's quotes."""
    start = secret[:12]
    return [start, json.dumps(start, ensure_ascii=False)[1:-1], json.dumps(start)[1:-1], repr(start)[1:-1]]


def sinks_of_a_failing_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], workflow: str, secret: str
) -> dict[str, str]:
    monkeypatch.setenv(ENV, secret)
    monkeypatch.setattr(runner.engine.run, "make_opener", lambda *_, **__: fake_opener)
    path = tmp_path / "flow.yaml"
    path.write_text(workflow)
    state = str(tmp_path / "state")
    sinks: dict[str, str] = {}
    main([str(path), "--state-dir", state, "--no-progress", "--json"])
    sinks["--json stdout"], sinks["--json stderr"] = capsys.readouterr()
    run_id = json.loads(sinks["--json stdout"])["run_id"]
    main([str(path), "--state-dir", state, "--no-progress", "--new-run"])
    sinks["console stdout"], sinks["console stderr"] = capsys.readouterr()
    for n, journal in enumerate(sorted((tmp_path / "state" / "runs").glob("*/journal.jsonl"))):
        sinks[f"journal {n}"] = journal.read_text()
    for argv in (["show", run_id], ["show", run_id, "--json"]):
        main([*argv, "--state-dir", state])
        out, err = capsys.readouterr()
        sinks[" ".join(argv[:1] + argv[2:])] = out + err
    return sinks


MARKS = ("§", "\\u00a7", "\\xa7")  # raw, JSON-escaped, repr-escaped


def assert_masked_whole(sinks: dict[str, str], secret: str, *, quoted_in: tuple[str, ...]) -> None:
    if len(secret) > 3:  # a shorter one is masked only where a whole value equals it: its text is everywhere
        found = {name: [s for s in shapes(secret) if s in text] + leaks(secret, text) for name, text in sinks.items()}
        assert {name: forms for name, forms in found.items() if forms} == {}
    if "§" in secret:  # no part of its first line either (too short to be masked inside text)
        shown = {name: [mark for mark in MARKS if mark in text.lower()] for name, text in sinks.items()}
        assert {name: marks for name, marks in shown.items() if marks} == {}
    # The error's text was masked where it was made: in the journal, its placeholder is text like any other,
    # escaped (``***=``), so that a resume reads it back as that text, never as the secret.
    quoted = {name: text.replace("***=", "***") for name, text in sinks.items() if name in quoted_in}
    assert {name: PLACEHOLDER in text for name, text in quoted.items()} == dict.fromkeys(quoted_in, True)
    for text in sinks.values():  # the value as it was quoted before: its start, cut, in quotes
        assert repr(secret[:37] + "...") not in text and repr(secret) not in text


ALL_SINKS = ("--json stdout", "console stderr", "journal 0", "journal 1", "show", "show --json")


@pytest.mark.parametrize("length", list(SECRETS))
@pytest.mark.parametrize("function", list(FUNCTIONS))
def test_a_template_error_quotes_a_secret_as_its_placeholder_in_every_sink(
    function: str,
    length: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = SECRETS[length]
    sinks = sinks_of_a_failing_run(
        tmp_path, monkeypatch, capsys, workflow_failing_in("args", FUNCTIONS[function]), secret
    )
    assert_masked_whole(sinks, secret, quoted_in=ALL_SINKS)


@pytest.mark.parametrize("place", ["args", "if", "for_each", "key", "outputs"])
def test_every_place_a_template_fails_quotes_a_secret_as_its_placeholder(
    place: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = SECRETS[41]
    sinks = sinks_of_a_failing_run(tmp_path, monkeypatch, capsys, workflow_failing_in(place, FUNCTIONS["abs"]), secret)
    # An output that fails to render is a warning on the console (the journal's run record says it failed).
    quoted_in = ("--json stderr", "console stderr") if place == "outputs" else ALL_SINKS
    assert_masked_whole(sinks, secret, quoted_in=quoted_in)
