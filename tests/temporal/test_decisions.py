"""Decisions about items in doubt on Temporal, as locally: ``--accept-in-doubt`` records the calls as done and
runs what follows; an item an earlier ``--skip-in-doubt`` settled is never called by a later
``--rerun-in-doubt``."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.temporal.support import MODES, cli, dev_server, in_process_worker, target_of

pytestmark = pytest.mark.slow


def _workflow(tmp: Path, steps: str) -> Path:
    path = tmp / "wf.yaml"
    path.write_text(
        f"""version: 1
servers:
  bad:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(MODES))}, die-on-call]
    reconnect: false
  good:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(MODES))}, ok]
steps:
{steps}"""
    )
    return path


def _calls(export: str) -> Counter[str]:
    """The calls made, by step: a Temporal run journals each call's end (``item_succeeded``, or ``item_failed``
    but for a skip, which calls nothing)."""
    events = [json.loads(line) for line in export.splitlines() if line.strip()]
    ends = [e for e in events if e.get("type") in ("item_succeeded", "item_failed")]
    return Counter(e["step"] for e in ends if e.get("kind") != "skipped-in-doubt")


def _decide(path: Path, queue: str, *decisions: str) -> list[tuple[int, str, str]]:
    async def on_temporal() -> list[tuple[int, str, str]]:
        async with dev_server() as env, in_process_worker(env, queue):
            here = ("--temporal-address", target_of(env))
            seen = [await cli(str(path), "--engine", "temporal", *here, "--task-queue", queue)]
            run_id = seen[0][2].split()[1]
            for decision in decisions:
                seen.append(await cli("resume", run_id, "--engine", "temporal", *here, decision))
            seen.append(await cli("export", run_id, "--engine", "temporal", *here))
            return seen

    return asyncio.run(on_temporal())


def test_accept_in_doubt_records_the_call_as_done_and_runs_what_follows(tmp_path: Path) -> None:
    path = _workflow(
        tmp_path,
        """  a: {server: bad, tool: echo, args: {text: a}}
  after: {server: good, tool: echo, needs: [a], args: {text: after}}
""",
    )
    (code, _, err), accepted, (_, export, _) = _decide(path, "accept", "--accept-in-doubt")
    assert code == 5, err
    assert "--accept-in-doubt" in err  # offered with the others
    assert accepted[0] == 0, accepted[2]
    assert _calls(export) == {"a": 1, "after": 1}
    assert '"type":"doubt_decided"' in export.replace(" ", "")


def test_a_later_rerun_never_calls_what_a_skip_settled(tmp_path: Path) -> None:
    path = _workflow(
        tmp_path,
        """  a: {server: bad, tool: echo, args: {text: a}, continue_on_error: true}
  b: {server: bad, tool: echo, needs: [a], args: {text: b}}
""",
    )
    (code, _, err), skipped, rerun, (_, export, _) = _decide(path, "rerun", "--skip-in-doubt", "--rerun-in-doubt")
    assert code == 5, err
    assert skipped[0] == 5, skipped[2]  # a skipped; b ran and is in doubt now
    assert rerun[0] == 5, rerun[2]  # b called again (its server dies again): a never
    assert _calls(export) == {"a": 1, "b": 2}


def test_a_resume_with_no_decision_is_refused_when_a_step_in_doubt_has_no_reconcile(tmp_path: Path) -> None:
    path = _workflow(tmp_path, "  a: {server: bad, tool: echo, args: {text: a}}\n")
    (code, _, err), (refused, _, why), (_, export, _) = _decide(path, "refuse", "--quiet")
    assert code == 5, err
    assert refused == 2, why
    assert "items of step 'a' are in doubt and it has no reconcile: to ask" in why
    assert _calls(export) == {"a": 1}
