"""On Temporal as locally: the first exit 5 prints the commands that decide the items in doubt, and every
command that takes a run id takes a unique prefix or suffix of one, or its random part, with the same errors
for an abbreviation that names several runs, or none."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runner.temporal.runids import abbreviates
from tests.temporal.support import cli, dev_server, fan_out_workflow, in_process_worker, target_of

RUN = "20261202T053409.722486Z-6dba02-55dfe7afce4b9eb6"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (RUN, True),
        ("20261202T0534", True),  # a prefix
        ("6dba02", True),  # the random part of its local id
        ("55dfe7afce4b9eb6", True),  # a suffix: the file's key (ambiguous among that file's runs)
        ("6dba02-55dfe7afce4b9eb6", True),
        ("T0534", False),
        ("", False),
    ],
)
def test_what_abbreviates_a_run_id(ref: str, expected: bool) -> None:
    assert abbreviates(ref, RUN) is expected


@pytest.mark.slow
def test_exit_5_prints_the_resume_commands_and_short_ids_name_the_run(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 1, mode="die-on-call")  # its one call is in doubt: exit 5
    (tmp_path / "parked").mkdir()
    parked = fan_out_workflow(tmp_path / "parked", 1)  # another file's run, open on a queue no worker serves

    async def on_temporal() -> dict[str, tuple[int, str, str]]:
        seen: dict[str, tuple[int, str, str]] = {}
        async with dev_server() as env, in_process_worker(env, "hints"):
            here = ("--temporal-address", target_of(env))
            seen["run"] = await cli(str(workflow), "--engine", "temporal", *here, "--task-queue", "hints")
            run_id = seen["run"][2].split()[1]
            random = run_id.split("-")[-2]
            seen["show by its random part"] = await cli("show", random, "--engine", "temporal", *here)
            seen["logs by a suffix"] = await cli("logs", run_id[-23:], "--engine", "temporal", *here)
            seen["export by a prefix"] = await cli("export", run_id[:20], "--engine", "temporal", *here)
            nowhere = ("--task-queue", "nowhere", "--detach")
            seen["parked"] = await cli(str(parked), "--engine", "temporal", *here, *nowhere)
            century = run_id[:2]  # both runs' ids begin so
            seen["ambiguous"] = await cli("show", century, "--engine", "temporal", *here)
            seen["unknown"] = await cli("show", "zz9zz9", "--engine", "temporal", *here)
            seen["resume by its random part"] = await cli(
                "resume", random, "--engine", "temporal", *here, "--skip-in-doubt"
            )
            parked_id = seen["parked"][2].split()[1]
            seen["cancel by a prefix"] = await cli("cancel", parked_id[:24], "--engine", "temporal", *here)
            seen["run_id"] = (0, run_id, parked_id)
        return seen

    seen = asyncio.run(on_temporal())
    _, run_id, parked_id = seen["run_id"]
    code, _out, err = seen["run"]
    assert code == 5, err
    address = err.split("--temporal-address ")[1].split()[0]  # the hints name the address given (not the default)
    for decision in ("--rerun-in-doubt", "--skip-in-doubt"):
        assert f"mcp-run resume {run_id} --engine temporal --temporal-address {address} {decision}" in err, err
    assert "cannot be resumed" not in err, err
    for what in ("show by its random part", "logs by a suffix", "export by a prefix"):
        code, out, err = seen[what]
        assert code == 0 and out, (what, err)
    assert run_id in seen["show by its random part"][1]
    assert run_id in seen["export by a prefix"][1]  # its events: the run_started of that run
    code, _out, err = seen["ambiguous"]
    assert code == 2 and "matches 2 runs on Temporal; say which:" in err, err
    assert run_id in err and parked_id in err, err
    code, _out, err = seen["unknown"]
    assert code == 2 and "no run zz9zz9 on Temporal; known runs: " in err and run_id in err, err
    code, _out, err = seen["resume by its random part"]
    assert code == 1 and "in doubt" in err, err  # the item recorded as failed: the run failed
    code, _out, err = seen["cancel by a prefix"]
    assert code == 0, err
