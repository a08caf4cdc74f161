"""``cache: DURATION``: a call that matches one an earlier run of the workflow made, within the duration, is not
made again; its result comes from that run's journal, and is journaled as reused, with the run it came from.

The runs are the library's (:func:`runner.engine.run.execute`, as the CLI drives it) on a fake server that
counts what it executed; the wall clock a cache is measured by is the run's ``clock`` option.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

import runner.engine.run
from runner._trio import single_error
from runner.cli import main
from runner.engine.core.cache import CacheHit, CacheIndex, cache_digest
from runner.engine.core.outcome import Outcome
from runner.engine.run import RunOptions, execute
from runner.session import Session, SessionOptions, open_session
from runner.testing.memory import memory_transport_pair
from runner.workflow.fingerprints import fingerprints
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import plan_of

WORKFLOW = """
version: 1
servers: {s: {command: [fake-server]}}
inputs:
  docs: {type: array, default: []}
  style: {type: string, default: plain}
  token: {type: string, default: token-0, secret: true}
steps:
  convert:
    server: s
    tool: convert
    for_each: "${{ inputs.docs }}"
    args: {path: "${{ item }}", style: "${{ inputs.style }}", token: "${{ inputs.token }}"}
    cache: 7d
  pages:
    server: s
    tool: join
    args: {texts: "${{ steps.convert.results[*].text }}"}
"""

DAY = 86_400.0


class World:
    """The fake server: what it executed, by tool and path."""

    def __init__(self) -> None:
        self.executed: Counter[str] = Counter()
        self.joined: list[list[str]] = []

    @asynccontextmanager
    async def opener(self, name: str, options: SessionOptions) -> AsyncIterator[Session]:
        async def convert(call: FakeCall) -> dict[str, Any]:
            self.executed[call.arguments["path"]] += 1
            return text_result(f"{call.arguments['path']}:{call.arguments['style']}")

        async def join(call: FakeCall) -> dict[str, Any]:
            self.joined.append(call.arguments["texts"])
            return text_result(" ".join(call.arguments["texts"]))

        with single_error():
            async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
                server = FakeServer(end)
                server.tools.update(convert=convert, join=join)
                nursery.start_soon(server.serve)
                async with open_session(client, options) as session:
                    yield session
                nursery.cancel_scope.cancel()

    def calls(self) -> int:
        return sum(self.executed.values())


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    made = World()
    monkeypatch.setattr(runner.engine.run, "make_opener", lambda *_, **__: made.opener)
    return made


def docs(n: int) -> list[str]:
    return [f"doc{i:02d}.md" for i in range(n)]


async def run(tmp_path: Path, world: World, n: int, *, days_later: float = 0.0, **options: Any) -> Outcome:
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW)
    now = time.time() + days_later * DAY
    inputs = {"docs": docs(n), **options.pop("inputs", {})}
    return await execute(
        workflow,
        RunOptions(inputs=inputs, state_dir=tmp_path / "state", new_run=True, clock=lambda: now, **options),
        opener=lambda *_: world.opener,
    )


def journal_of(outcome: Outcome) -> list[dict[str, Any]]:
    assert outcome.run_dir is not None
    return [json.loads(line) for line in (outcome.run_dir / "journal.jsonl").read_text().splitlines()]


def convert_results(journal: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in journal if e["type"] == "item_succeeded" and e["step"] == "convert"]


async def test_ten_then_thirteen_items_makes_three_calls(tmp_path: Path, world: World) -> None:
    first = await run(tmp_path, world, 10)
    assert first.exit_code == 0 and world.calls() == 10
    world.executed.clear()

    second = await run(tmp_path, world, 13, days_later=6.9)
    assert second.exit_code == 0
    assert world.calls() == 3 and set(world.executed) == set(docs(13)[10:])
    journal = journal_of(second)
    reused = [e for e in convert_results(journal) if e.get("reused_from")]
    assert len(reused) == 10 and {e["reused_from"] for e in reused} == {first.run_id}
    assert all(len(e["cache"]) == 64 for e in convert_results(journal))
    # The reused results reach the templates that read the step, as a made call's do.
    assert world.joined[-1] == [f"{d}:plain" for d in docs(13)]
    assert second.steps["convert"].reused == 10 and second.steps["convert"].succeeded == 13
    finished = [e for e in journal if e["type"] == "step_finished" and e["step"] == "convert"]
    assert finished[0]["counts"]["reused"] == 10


async def test_the_journal_keeps_a_digest_never_the_arguments(tmp_path: Path, world: World) -> None:
    first = await run(tmp_path, world, 2, inputs={"token": "sk-secret-value-0123"})
    text = (first.run_dir / "journal.jsonl").read_text() if first.run_dir else ""
    assert "sk-secret-value-0123" not in text
    digests = {e["cache"] for e in convert_results(journal_of(first))}
    assert digests == {
        cache_digest("s", "convert", {"path": d, "style": "plain", "token": "sk-secret-value-0123"}) for d in docs(2)
    }


async def test_a_changed_argument_is_a_miss(tmp_path: Path, world: World) -> None:
    await run(tmp_path, world, 10)
    world.executed.clear()
    await run(tmp_path, world, 10, inputs={"style": "fancy"})
    assert world.calls() == 10
    world.executed.clear()
    await run(tmp_path, world, 10, inputs={"token": "token-1"})  # a secret is part of the key (hashed)
    assert world.calls() == 10


async def test_an_expired_entry_is_a_miss(tmp_path: Path, world: World) -> None:
    await run(tmp_path, world, 10)
    world.executed.clear()
    outcome = await run(tmp_path, world, 10, days_later=7.01)
    assert world.calls() == 10 and outcome.steps["convert"].reused == 0


async def test_a_hit_is_as_old_as_the_call_it_reuses(tmp_path: Path, world: World) -> None:
    first = await run(tmp_path, world, 10)
    backdate(first, days=5)
    world.executed.clear()
    second = await run(tmp_path, world, 10)
    assert world.calls() == 0 and second.steps["convert"].reused == 10
    # 2.5 days on, the calls are 7.5 days old: a miss, though the second run journaled its reuse 2.5 days ago.
    await run(tmp_path, world, 10, days_later=2.5)
    assert world.calls() == 10


def backdate(outcome: Outcome, *, days: float) -> None:
    """Rewrite the run's journal as if it had been written ``days`` earlier (its times and its file's)."""
    assert outcome.run_dir is not None
    path = outcome.run_dir / "journal.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        then = datetime.fromisoformat(event["ts"].replace("Z", "+00:00")) - timedelta(days=days)
        event["ts"] = then.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        lines.append(json.dumps(event, separators=(",", ":")) + "\n")
    path.write_text("".join(lines))
    when = time.time() - days * DAY
    os.utime(path, (when, when))


async def test_no_cache_calls_all_and_records_for_the_next_run(tmp_path: Path, world: World) -> None:
    first = await run(tmp_path, world, 10)
    world.executed.clear()
    second = await run(tmp_path, world, 10, no_cache=True)
    assert world.calls() == 10 and second.steps["convert"].reused == 0
    world.executed.clear()
    third = await run(tmp_path, world, 10)
    assert world.calls() == 0
    sources = {e["reused_from"] for e in convert_results(journal_of(third))}
    assert sources == {second.run_id} and first.run_id not in sources  # the newest result of a key


def test_no_cache_on_the_command_line(tmp_path: Path, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    workflow = tmp_path / "flow.yaml"
    workflow.write_text(WORKFLOW)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"docs": docs(4)}))
    common = [str(workflow), "--state-dir", str(tmp_path / "state"), "--inputs-file", str(inputs), "--no-progress"]
    assert main([*common, "--new-run"]) == 0
    assert main([*common, "--new-run"]) == 0
    assert world.calls() == 4
    out, err = capsys.readouterr()
    assert "(4 reused)" in out + err
    assert main([*common, "--new-run", "--no-cache"]) == 0
    assert world.calls() == 8


def test_cache_changes_no_fingerprint() -> None:
    without = plan_of(WORKFLOW.replace("    cache: 7d\n", ""))
    assert fingerprints(plan_of(WORKFLOW), {}) == fingerprints(without, {})


def test_the_index_keeps_the_newest_result_and_measures_age_from_now() -> None:
    index = CacheIndex(now=10 * DAY)
    index.offer("k", CacheHit("old", {"content": []}, at=1 * DAY))
    index.offer("k", CacheHit("new", {"content": []}, at=5 * DAY))
    index.offer("k", CacheHit("older", {"content": []}, at=0.5 * DAY))
    hit = index.find("k", 7 * DAY)
    assert hit is not None and hit.run_id == "new"
    assert index.find("k", 4 * DAY) is None and index.find("other", 7 * DAY) is None
