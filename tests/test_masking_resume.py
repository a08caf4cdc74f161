"""A resume reads back only the masker's placeholders: a server (or an input) cannot make it send a secret.

The run is the CLI's, in process, on a scripted fake server: step ``a`` answers with a text of the test's
choosing, step ``b`` sends that text on. A crash right after ``a``'s result was journaled is the journal cut
there (what a kill -9 leaves); ``--resume`` then calls ``b`` with ``a``'s result read back from the journal. An
uninterrupted run sends ``b`` exactly what ``a`` answered; so must every resume, and ``show`` and ``logs``
print the server's text as it sent it.
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

SECRET = "sk-live-0123456789abcdef"

WORKFLOW = """
version: 1
servers: {s: {command: [fake-server]}}
inputs:
  note: {type: string, default: "n"}
steps:
  a: {server: s, tool: answer, args: {key: "${{ env.API_KEY }}"}}
  b: {server: s, tool: take, needs: [a], args: {text: "${{ steps.a.text }}", note: "${{ inputs.note }}"}}
"""

FORGED = [
    "***env.API_KEY***",
    "Bearer ***env.API_KEY***",
    "***env.API_KEY:json***",
    "******env.API_KEY******",
    "***=env.API_KEY***=",
    "***inputs.note***",
]


class World:
    """The fake server's script (what ``answer`` says) and what ``take`` was sent."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.taken: list[dict[str, Any]] = []

    @asynccontextmanager
    async def opener(self, name: str, options: SessionOptions) -> AsyncIterator[Session]:
        async def answer(call: FakeCall) -> dict[str, Any]:
            text = self.answer.replace("{key}", call.arguments["key"])
            await call.log("warning", {"said": text})
            return text_result(text, is_error=text.startswith("fail"))

        async def take(call: FakeCall) -> dict[str, Any]:
            self.taken.append(call.arguments)
            return text_result(call.arguments["text"])

        with single_error():
            async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
                server = FakeServer(end)
                server.tools.update(answer=answer, take=take)
                nursery.start_soon(server.serve)
                async with open_session(client, options) as session:
                    yield session
                nursery.cancel_scope.cancel()


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    made = World("")
    monkeypatch.setattr(runner.engine.run, "make_opener", lambda *_, **__: made.opener)
    monkeypatch.setenv("API_KEY", SECRET)
    return made


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def crash_after_a(state: Path) -> Path:
    """Cut the run's journal right after step ``a``'s result: a kill -9 before ``b`` was dispatched."""
    (journal,) = (state / "runs").glob("*/journal.jsonl")
    lines = journal.read_bytes().splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines) if json.loads(line)["type"] == "item_succeeded")
    journal.write_bytes(b"".join(lines[: cut + 1]))
    return journal


def run_crash_resume(
    tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str], *, note: str = "n"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """An uninterrupted run and a crashed-then-resumed run: what ``b`` was sent by each, and the resume's
    stderr."""
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW)
    common = ["--state-dir", str(tmp_path / "state"), "--quiet", "--no-progress"]
    code, _, err = cli(capsys, str(workflow), *common, "--input", f"note={note}", "--new-run")
    assert code == 0, err
    uninterrupted, world.taken = world.taken, []
    crash_after_a(tmp_path / "state")
    code, _, err = cli(capsys, str(workflow), *common, "--resume")
    assert code == 0, err
    return uninterrupted, world.taken, err


@pytest.mark.parametrize("forged", FORGED)
def test_a_server_that_echoes_placeholder_like_text_gets_that_text_back_on_resume(
    forged: str, tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.answer = forged
    uninterrupted, resumed, _ = run_crash_resume(tmp_path, world, capsys)
    assert uninterrupted == resumed == [{"text": forged, "note": "n"}]
    assert SECRET not in json.dumps(resumed)


def test_a_secret_a_server_echoed_is_sent_on_after_a_resume_as_without_one(
    tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The masker's own placeholder does read back as the secret: a resume sends what the run would have."""
    world.answer = "got {key} and ***env.API_KEY***"
    uninterrupted, resumed, _ = run_crash_resume(tmp_path, world, capsys)
    expected = f"got {SECRET} and ***env.API_KEY***"
    assert uninterrupted == resumed == [{"text": expected, "note": "n"}]
    journal = next((tmp_path / "state" / "runs").glob("*/journal.jsonl")).read_text()
    assert SECRET not in journal and "got ***env.API_KEY*** and ***=env.API_KEY***=" in journal


@pytest.mark.parametrize("note", ["***env.API_KEY***", "a ***env.API_KEY:json*** b", "***inputs.note***", "***"])
def test_an_input_that_looks_like_a_placeholder_resumes_as_given_not_as_changed(
    note: str, tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.answer = "plain"
    uninterrupted, resumed, err = run_crash_resume(tmp_path, world, capsys, note=note)
    assert "changed" not in err
    assert uninterrupted == resumed == [{"text": "plain", "note": note}]


def test_show_and_logs_print_a_servers_text_as_it_sent_it_and_secrets_masked(
    tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.answer = "fail: forged ***env.API_KEY*** real {key}"
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW)
    state = str(tmp_path / "state")
    code, out, _ = cli(capsys, str(workflow), "--state-dir", state, "--json", "--no-progress")
    assert code == 1
    run_id = json.loads(out)["run_id"]
    (journal,) = (tmp_path / "state" / "runs").glob("*/journal.jsonl")
    line = next(json.loads(line) for line in journal.read_text().splitlines() if '"item_failed"' in line)
    assert line["result"]["content"][0]["text"] == "fail: forged ***=env.API_KEY***= real ***env.API_KEY***"
    as_sent = "fail: forged ***env.API_KEY*** real ***env.API_KEY***"  # a secret masked: its placeholder
    for argv in (["show", run_id], ["show", run_id, "--json"], ["logs", run_id]):
        code, shown, _ = cli(capsys, *argv, "--state-dir", state)
        assert code == 0 and SECRET not in shown
        assert as_sent in shown and "***=" not in shown, argv  # the escape is the journal's, never shown


def test_a_secret_input_is_never_written_and_must_be_given_again(
    tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW.replace('note: {type: string, default: "n"}', "note: {type: string, secret: true}"))
    state = tmp_path / "state"
    world.answer = "plain"
    common = ["--state-dir", str(state), "--quiet", "--no-progress"]
    assert cli(capsys, str(workflow), *common, "--input", "note=hunter2-hunter2")[0] == 0
    journal = crash_after_a(state)
    first = json.loads(journal.read_text().splitlines()[0])
    assert first["inputs"] == {"note": "***inputs.note***"} and first["secret_inputs"] == ["note"]
    code, _, err = cli(capsys, str(workflow), *common, "--resume")
    assert code == 2 and "note" in err  # asked for again, never read from the journal
    world.taken = []
    assert cli(capsys, str(workflow), *common, "--resume", "--input", "note=hunter2-hunter2")[0] == 0
    assert world.taken == [{"text": "plain", "note": "hunter2-hunter2"}]


def test_a_run_journaled_in_format_2_resumes_with_the_meaning_it_had(
    tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A journal of format 2 holds masked text: a resume reads its placeholders back as secrets (as the
    version that wrote it did), and goes on writing it in format 2."""
    world.answer = "got {key} ***x"
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW)
    common = ["--state-dir", str(tmp_path / "state"), "--quiet", "--no-progress"]
    assert cli(capsys, str(workflow), *common)[0] == 0
    world.taken = []
    journal = crash_after_a(tmp_path / "state")
    lines = journal.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    first["journal"] = 2
    del first["secret_inputs"]
    # As format 2 wrote it: masked, a server's *** as it is.
    journal.write_text(json.dumps(first) + "\n" + "".join(lines[1:]).replace("***=", "***"))
    assert cli(capsys, str(workflow), *common, "--resume")[0] == 0
    assert world.taken == [{"text": f"got {SECRET} ***x", "note": "n"}]
    # Written on as it was: masked, not encoded (b's result echoes what it was sent).
    assert '"text":"got ***env.API_KEY*** ***x"' in journal.read_text().splitlines()[-3]
