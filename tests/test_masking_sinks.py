"""Secrets never reach an output, whatever their shape: a property test over every sink of a run.

Hypothesis makes two secrets (quotes, backslashes, newlines, tabs, escape characters, unicode, JSON-like text),
one a ``secret: true`` input and one an environment variable the workflow reads. A scripted fake server echoes
them back every way it can: in a result's text (raw, and as JSON), in its structured content, in a tool error
(as Python's repr), in a JSON-RPC error (JSON-escaped), in a log notification and a progress message; the
outputs interpolate them as JSON once more. The run is the CLI's, in process (its journal in a temporary state
directory; sessions opened on the fake). Then every sink is searched: the journal's bytes, ``--json`` and the
text summary, ``--output``, stdout and stderr, ``show`` (text and ``--json``), ``logs`` and ``runs``.

Every line of a secret holds a mark (``§`` or ``¤``) and is longer than 3 characters, so it must be masked
wherever it shows, however escaped: a mark in a sink (raw or JSON-escaped) is a leak. (A stdio server's stderr
tail is tested end to end, with a real server: ``tests/e2e/test_secrets_on_stderr.py``.)
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runner.engine.run
from runner._trio import single_error
from runner.cli import main
from runner.protocol.jsonrpc import ErrorResponse
from runner.session import Session, SessionOptions, open_session
from runner.testing.memory import memory_transport_pair
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.test_masking import leaks

ENV = "MCP_RUN_MASK_TOKEN"

WORKFLOW = f"""
version: 1
servers:
  s: {{command: [fake-server]}}
inputs:
  pw: {{type: string, secret: true}}
steps:
  echo:
    server: s
    tool: echo
    args:
      text: "${{{{ inputs.pw }}}}"
      token: "${{{{ env.{ENV} }}}}"
      as_json: "v=${{{{ [env.{ENV}, inputs.pw] }}}}"
  refuse:
    server: s
    tool: refuse
    args: {{text: "${{{{ inputs.pw }}}}", token: "${{{{ env.{ENV} }}}}"}}
    continue_on_error: true
  reject:
    server: s
    tool: reject
    args: {{token: "${{{{ env.{ENV} }}}}", text: "${{{{ inputs.pw }}}}"}}
    continue_on_error: true
outputs:
  echoed: ${{{{ steps.echo.text }}}}
  structured: ${{{{ steps.echo.structured }}}}
  joined: "j=${{{{ [steps.echo.text, steps.refuse.text] }}}}"
"""


def fake_tools(server: FakeServer) -> None:
    async def echo(call: FakeCall) -> dict[str, Any]:
        args = call.arguments
        await call.log("warning", {"said": args["text"], "token": args["token"]})
        await call.progress(1, 2, f"working on {args['text']}")
        return {
            "content": [
                {"type": "text", "text": json.dumps(args, ensure_ascii=False)},
                {"type": "text", "text": f"raw: {args['text']} / {args['token']}"},
            ],
            "structuredContent": args,
        }

    async def refuse(call: FakeCall) -> dict[str, Any]:
        return text_result(f"refused {call.arguments!r}", is_error=True)

    async def reject(call: FakeCall) -> ErrorResponse:
        return ErrorResponse(call.request.id, -32602, f"invalid arguments {json.dumps(call.arguments)}")

    async def broken(call: FakeCall) -> dict[str, Any]:
        raise AssertionError("never called: its request fails to be sent")

    server.tools.update(echo=echo, refuse=refuse, reject=reject, broken=broken)


@asynccontextmanager
async def fake_opener(name: str, options: SessionOptions) -> AsyncIterator[Session]:
    """Sessions on a :class:`FakeServer` with the tools above."""
    with single_error():
        async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
            server = FakeServer(end)
            fake_tools(server)
            nursery.start_soon(server.serve)
            async with open_session(client, options) as session:
                yield session
            nursery.cancel_scope.cancel()


ALPHABET = st.sampled_from(
    ['"', "\\", "\n", "\r", "\t", "\x1b", "{", "}", ":", ",", "[", "é", "😀", "\u2028", "a", " "]
)
JSON_LIKE = st.sampled_from(["false", '{"a":1}', "null", '["x"]', ""])


@st.composite
def secrets(draw: st.DrawFn, mark: str) -> str:
    """A secret whose every line holds ``mark`` (so no form of it can appear in an output by chance)."""
    lines = draw(st.lists(st.tuples(st.text(ALPHABET, min_size=2, max_size=6), JSON_LIKE), min_size=1, max_size=3))
    return "\n".join(f"{mark}{text}{json_like}{mark}" for text, json_like in lines)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pw=secrets("§"), token=secrets("¤"))
def test_no_sink_shows_any_form_of_a_secret(
    pw: str, token: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV, token)
    monkeypatch.setattr(runner.engine.run, "make_opener", lambda *_, **__: fake_opener)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        workflow = folder / "flow.yaml"
        workflow.write_text(WORKFLOW)
        state = str(folder / "state")
        common = ["--state-dir", state, "--input", f"pw={pw}", "--retry-attempts", "1", "--no-progress"]
        outputs = folder / "out.json"
        sinks: dict[str, str] = {}

        code, sinks["--json stdout"], sinks["--json stderr"] = run(
            capsys, str(workflow), *common, "--json", "--output", str(outputs)
        )
        summary = json.loads(sinks["--json stdout"])
        assert code == 0 and summary["status"] == "succeeded"  # the failing steps continue on error
        # The secrets did go out and come back: each sink holds their placeholders where they were.
        assert summary["outputs"]["structured"]["text"] == "***inputs.pw***"
        assert summary["outputs"]["structured"]["token"] == f"***env.{ENV}***"
        sinks["--output"] = outputs.read_text()
        code, sinks["text stdout"], sinks["text stderr"] = run(capsys, str(workflow), *common)
        assert code == 0
        journals = list((folder / "state" / "runs").glob("*/journal.jsonl"))
        assert len(journals) == 2
        sinks |= {f"journal {n}": j.read_bytes().decode() for n, j in enumerate(journals)}
        run_id = summary["run_id"]
        for name, argv in {
            "show": ["show", run_id],
            "show --json": ["show", run_id, "--json"],
            "logs": ["logs", run_id],
            "runs": ["runs"],
        }.items():
            _, out, err = run(capsys, *argv, "--state-dir", state)
            sinks[name] = out + err

        assert "refused" in sinks["show"] and "***env." in sinks["logs"]  # the failures and logs are there
        assert "***inputs.pw" in sinks["journal 0"] and f"***env.{ENV}" in sinks["journal 0"]
        found = {name: leaks(pw, text) + leaks(token, text) for name, text in sinks.items()}
        assert {name: forms for name, forms in found.items() if forms} == {}
        marks = ("§", "¤", "\\u00a7", "\\u00a4", "\\xa7", "\\xa4")  # raw, JSON-escaped, repr-escaped
        shown = {name: [m for m in marks if m in text.lower()] for name, text in sinks.items()}
        assert {name: m for name, m in shown.items() if m} == {}
