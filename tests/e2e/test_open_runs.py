"""Runs that end without a definite answer for every item stay open, and the crontab line
(`mcp-run FILE --resume`) never calls anything twice to close them.

The server is the official SDK's test peer over stdio; its ``count`` tool appends the item's key to a file
(fsynced) once per execution, the ground truth of what ran. Real processes: the real clock, bounded.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import count_fan_out, counting_peer, journal_events, run_and_kill_at, run_cli

pytestmark = pytest.mark.integration


def write(tmp: Path, *, items: list[str], step_extra: str = "") -> tuple[Path, Path]:
    """The fan-out of ``items`` on the counting peer, which starts only while ``<tmp>/server-enabled`` exists;
    item ``hang`` takes 30 s, the others 0.05 s."""
    count_file = tmp / "executions.txt"
    peer = counting_peer(count_file, max_concurrency=2, guard=tmp / "server-enabled")
    args = """{key: "${{ item }}", delay: "${{ item == 'hang' && `30` || `0.05` }}"}"""
    workflow = count_fan_out(tmp, items, peer=peer, args=args, step_extra=step_extra)
    (tmp / "server-enabled").touch()
    return workflow, count_file


def run(tmp: Path, workflow: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    result = run_cli(
        tmp, str(workflow), "--inputs-file", str(tmp / "inputs.json"), "--state-dir", str(tmp / "state"),
        "--json", "--no-progress", *extra,
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def executions(count_file: Path) -> Counter[str]:
    return Counter(count_file.read_text().split()) if count_file.exists() else Counter()


def run_ids(tmp: Path) -> list[str]:
    return sorted(p.name for p in (tmp / "state" / "runs").iterdir())


@pytest.mark.slow
def test_a_call_that_times_out_keeps_the_run_open_until_decided(tmp_path: Path) -> None:
    items = ["a", "b", "hang", "c", "d"]
    workflow, count_file = write(tmp_path, items=items, step_extra="    idle_timeout: 1s")
    code, summary, stderr = run(tmp_path, workflow)
    assert (code, summary["status"]) == (5, "in-doubt"), stderr
    assert [d["item"] for d in summary["in_doubt"]] == ["hang"]
    assert [d["kind"] for d in summary["in_doubt"]] == ["timeout"]
    assert "--skip-in-doubt" in stderr and "--rerun-in-doubt" in stderr
    assert journal_events(tmp_path)[-1]["type"] == "run_stopped"  # open: not closed as finished
    first_run = run_ids(tmp_path)

    # The crontab line: calls nothing, still reports the item in doubt, starts no new run.
    code, summary, stderr = run(tmp_path, workflow, "--resume")
    assert code == 5, stderr
    assert [d["item"] for d in summary["in_doubt"]] == ["hang"]
    assert run_ids(tmp_path) == first_run
    code, summary, stderr = run(tmp_path, workflow)  # plain: refused, the run is unfinished
    assert code == 2 and run_ids(tmp_path) == first_run, stderr

    # A decision closes the same run; nothing ran twice.
    code, summary, stderr = run(tmp_path, workflow, "--resume", "--skip-in-doubt")
    assert (code, summary["status"]) == (1, "failed"), stderr
    assert run_ids(tmp_path) == first_run
    assert journal_events(tmp_path)[-1]["type"] == "run_finished"
    assert max(executions(count_file).values()) == 1
    assert set(executions(count_file)) == set(items)
    code, _, stderr = run(tmp_path, workflow, "--resume")  # closed now: the crontab line starts a new run,
    assert code == 5 and len(run_ids(tmp_path)) == 2, stderr  # in which "hang" is called (and hangs) afresh


@pytest.mark.slow
def test_a_server_that_cannot_start_at_resume_leaves_the_run_open(tmp_path: Path) -> None:
    items = [f"k{i:02d}" for i in range(30)]
    workflow, count_file = write(tmp_path, items=items)
    args = [sys.executable, "-m", "runner", str(workflow), "--inputs-file", str(tmp_path / "inputs.json"),
            "--state-dir", str(tmp_path / "state"), "--quiet"]  # fmt: skip
    run_and_kill_at(tmp_path, args, 20)  # crashed mid-run
    first_run = run_ids(tmp_path)
    assert len(first_run) == 1

    (tmp_path / "server-enabled").unlink()  # the server cannot start now (it exits at once)
    code, summary, stderr = run(tmp_path, workflow, "--resume", "--skip-in-doubt")
    assert (code, summary["status"]) == (4, "incomplete"), stderr
    assert "error server peer" in stderr
    assert journal_events(tmp_path)[-1]["type"] == "run_stopped"

    (tmp_path / "server-enabled").touch()
    code, summary, stderr = run(tmp_path, workflow, "--resume")
    assert run_ids(tmp_path) == first_run  # the same run goes on
    assert code in (0, 1), stderr  # 1 when the crash left an item in doubt (skipped above)
    ran = executions(count_file)
    assert max(ran.values()) == 1, "an item ran twice"
    assert summary["steps"]["each"]["succeeded"] + summary["steps"]["each"]["failed"] == len(items)


def test_a_server_answering_garbage_and_wrong_ids_ends_its_calls_at_the_idle_timeout(tmp_path: Path) -> None:
    modes = Path(__file__).resolve().parents[1] / "fakes" / "mcp_modes.py"
    (tmp_path / "inputs.json").write_text(json.dumps({"items": ["a", "b", "c", "d", "e"]}))
    workflow = tmp_path / "wrong.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
  odd:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(modes))}, wrong-ids]
    idle_timeout: 1s
inputs:
  items: {{type: array}}
steps:
  each: {{server: odd, tool: echo, for_each: "${{{{ inputs.items }}}}", key: "${{{{ item }}}}",
         args: {{text: "${{{{ item }}}}"}}}}
"""
    )
    code, summary, stderr = run(tmp_path, workflow)
    assert (code, summary["status"]) == (5, "in-doubt"), stderr  # never a hang: each call ends at 1 s idle
    assert sorted(d["item"] for d in summary["in_doubt"]) == ["a", "b", "c", "d", "e"]
    assert {d["kind"] for d in summary["in_doubt"]} == {"timeout"}
    assert summary["stray"] == {"odd": {"invalid_lines": 5, "unmatched_responses": 5}}
    # the first few of each are shown, then only counted
    assert stderr.count("that is not JSON-RPC (not JSON)") == 3 and stderr.count("matches no request") == 3, stderr
    assert "further lines are only counted" in stderr and "further ones are only counted" in stderr


def test_a_stdio_server_that_stops_reading_after_initialize_leaves_the_run_open_with_exit_4(tmp_path: Path) -> None:
    # It answers initialize, then reads and answers nothing: tools/list goes unanswered, so no call is sent.
    modes = Path(__file__).resolve().parents[1] / "fakes" / "mcp_modes.py"
    (tmp_path / "inputs.json").write_text("{}")
    workflow = tmp_path / "deaf.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
  deaf:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(modes))}, deaf]
    connect_timeout: 1s
    reconnect: 2s
    idle_timeout: 3s
steps:
  one: {{server: deaf, tool: echo, args: {{text: hi}}}}
"""
    )
    code, summary, stderr = run(tmp_path, workflow)
    assert (code, summary["status"]) == (4, "incomplete"), stderr
    assert summary["in_doubt"] == []
    assert "the server answered nothing to tools/list" in stderr and "the call was not sent" in stderr
    events = journal_events(tmp_path)
    assert not [e for e in events if e["type"] == "item_dispatched"]
    assert [e["type"] for e in events][-1] == "run_stopped"  # open: a resume goes on with this run
    assert "resume" in stderr
