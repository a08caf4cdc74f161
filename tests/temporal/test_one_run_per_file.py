"""One open run per workflow file on Temporal, decided by Temporal itself: starts that race each other give one
run, the others are refused as a local start that finds the workflow busy is (exit 6); once the run is closed,
the next one starts, and the older run is still found by its id."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.cli import main
from tests.temporal.support import cli, dev_server, fan_out_workflow, in_process_worker, summary_of, target_of


@pytest.mark.parametrize(("waiting", "code", "words"), [(None, 6, "is running on Temporal"), (False, 6, "is running"),
                                                       (True, 2, "waits on Temporal for a decision")])  # fmt: skip
def test_a_refused_start_is_said_as_locally(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    waiting: bool | None,
    code: int,
    words: str,
) -> None:
    """Busy (6) while the open run runs, as when a process holds the local lock; unfinished (2) while it waits
    for a decision, as an interrupted local run; either way with the command that follows it."""
    from runner.temporal import client as client_module

    path = fan_out_workflow(tmp_path, 1)
    monkeypatch.chdir(tmp_path)  # the hint names the file relative to here when shorter: the same in any checkout

    async def connect(address: str) -> object:
        return object()

    async def start_run(client: object, spec: object, task_queue: str) -> object:
        raise client_module.RunAlreadyOpen("r1-0123456789abcdef", str(path), waiting=waiting)

    monkeypatch.setattr(client_module, "connect", connect)
    monkeypatch.setattr(client_module, "start_run", start_run)
    assert main([str(path), "--engine", "temporal"]) == code
    err = capsys.readouterr().err
    assert "run r1-0123456789abcdef of" in err and words in err, err
    assert f"mcp-run {path.name} --resume --engine temporal" in err, err
    assert ("--rerun-in-doubt" in err) is bool(waiting)


def test_a_refused_start_names_the_inputs_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command that follows the open run carries the inputs of the refused one, so pasted it resumes
    rather than being refused as a change of inputs."""
    from runner.temporal import client as client_module

    path = fan_out_workflow(tmp_path, 1)
    monkeypatch.chdir(tmp_path)

    async def connect(address: str) -> object:
        return object()

    async def start_run(client: object, spec: object, task_queue: str) -> object:
        raise client_module.RunAlreadyOpen("r1-0123456789abcdef", str(path), waiting=True)

    monkeypatch.setattr(client_module, "connect", connect)
    monkeypatch.setattr(client_module, "start_run", start_run)
    assert main([str(path), "--engine", "temporal", "--input", 'items=["a b"]']) == 2
    err = capsys.readouterr().err
    assert f"mcp-run {path.name} --resume --engine temporal --input 'items=[\"a b\"]' --rerun-in-doubt" in err, err
    # and its task queue, when not the default: if the open run ends first, the pasted command starts one there
    assert main([str(path), "--engine", "temporal", "--task-queue", "batch", "--input", 'items=["a b"]']) == 2
    err = capsys.readouterr().err
    assert f"mcp-run {path.name} --resume --engine temporal --task-queue batch --input 'items=[\"a b\"]'" in err, err


@pytest.mark.parametrize("name", ["-wf.yaml", "show"])
def test_a_refused_start_names_a_workflow_the_command_line_would_misread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Given as ``./-wf.yaml`` or ``./show``, the workflow is named so in the command that follows the open
    run: as ``-wf.yaml`` it would be read as an option, as ``show`` as the command of that name."""
    from runner.temporal import client as client_module

    path = fan_out_workflow(tmp_path, 1).rename(tmp_path / name)
    monkeypatch.chdir(tmp_path)

    async def connect(address: str) -> object:
        return object()

    async def start_run(client: object, spec: object, task_queue: str) -> object:
        raise client_module.RunAlreadyOpen("r1-0123456789abcdef", str(path), waiting=False)

    monkeypatch.setattr(client_module, "connect", connect)
    monkeypatch.setattr(client_module, "start_run", start_run)
    assert main([f"./{name}", "--engine", "temporal"]) == 6
    err = capsys.readouterr().err
    assert f"Follow it with:\n  mcp-run ./{name} --resume --engine temporal\n" in err, err


@pytest.mark.slow
def test_racing_starts_give_one_run_and_a_closed_run_lets_the_next_start(tmp_path: Path) -> None:
    from runner.cli.temporal import run_temporal  # noqa: F401  (the CLI module imports)
    from runner.temporal.client import RunAlreadyOpen, make_spec, start_run
    from runner.temporal.runids import file_workflow_id, locate
    from runner.workflow.loader import validate

    workflow = fan_out_workflow(tmp_path, 2)
    wid = file_workflow_id(workflow.resolve())

    async def executions(env: object) -> list[str]:
        client = env.client  # type: ignore[attr-defined]
        out: list[str] = []
        for _ in range(100):  # Temporal's list lags: wait until it shows a run, then count them all
            out = [e.run_id async for e in client.list_workflows(f'WorkflowId = "{wid}"')]
            if out:
                return out
            await asyncio.sleep(0.05)
        return out

    async def on_temporal() -> None:
        async with dev_server() as env:
            where = ("--temporal-address", target_of(env), "--task-queue", "race")
            # Five starts at once through the client: Temporal lets exactly one through.
            plan = validate(str(workflow), require_inputs=True)
            specs = [make_spec(workflow, plan) for _ in range(5)]
            results = await asyncio.gather(
                *(start_run(env.client, spec, "race") for spec in specs), return_exceptions=True
            )
            won = [spec.run_id for spec, r in zip(specs, results, strict=True) if not isinstance(r, BaseException)]
            lost = [r for r in results if isinstance(r, BaseException)]
            assert len(won) == 1, results
            assert all(isinstance(r, RunAlreadyOpen) and r.run_id == won[0] for r in lost), lost
            assert len(await executions(env)) == 1
            await env.client.get_workflow_handle(wid).terminate("the test starts again")

            # Two CLI processes started together: one run; the other is busy (6, as locally) and names it.
            both = await asyncio.gather(
                cli(str(workflow), "--engine", "temporal", *where, "--detach"),
                cli(str(workflow), "--engine", "temporal", *where, "--detach"),
            )
            codes = sorted(code for code, _out, _err in both)
            assert codes == [0, 6], both
            [winner] = [err for code, _out, err in both if code == 0]
            [loser] = [err for code, _out, err in both if code == 6]
            first = winner.split()[1]
            assert f"run {first} of" in loser and "is running on Temporal" in loser and "--resume" in loser, loser
            assert len(await executions(env)) == 2  # the terminated one, and this one

            # Two `--resume` together (a crontab line firing during a start): both follow the one open run.
            resumed = await asyncio.gather(
                *(cli(str(workflow), "--engine", "temporal", *where, "--resume", "--detach") for _ in range(2))
            )
            assert [code for code, _o, _e in resumed] == [0, 0], resumed
            assert all(f"following run {first}" in err for _c, _o, err in resumed), resumed
            assert len(await executions(env)) == 2

            # A changed file is not resumed as is (exit 2, as locally): the run goes on with its own definition.
            text = workflow.read_text()
            workflow.write_text(text.replace("max_concurrency: 8", "max_concurrency: 8\n    timeout: 30"))
            code, _out, err = await cli(str(workflow), "--engine", "temporal", *where, "--resume", "--detach")
            assert code == 2 and f"run {first} of" in err and "cannot be resumed as is" in err, err
            assert "the workflow file changed since the run started" in err and "steps whose" in err, err
            workflow.write_text(text)

            # With a worker, the open run finishes; the next start is a new run; the older one is still found.
            async with in_process_worker(env, "race"):
                code, _out, err = await cli(str(workflow), "--engine", "temporal", *where, "--resume", "--json")
                assert code == 0, err
                code, out, err = await cli(str(workflow), "--engine", "temporal", *where, "--json")
                assert code == 0, err
                second = summary_of(out)["run_id"]
                assert second != first
                code, journal, err = await cli("export", first, "--engine", "temporal", *where[:2])
                assert code == 0, err
                assert json.loads(journal.splitlines()[0])["run_id"] == first
                older = await locate(env.client, first)
                newer = await locate(env.client, second)
                assert older.handle.id == newer.handle.id == wid
                assert older.handle.run_id != newer.handle.run_id
                code, out, err = await cli("runs", "--engine", "temporal", *where[:2], "--json")
                assert code == 0, err
                listed = [r["run_id"] for r in json.loads(out)["runs"]]
                assert first in listed and second in listed

    asyncio.run(on_temporal())
