"""kill -9 of a worker mid-batch, two workers, a tool that is not safe to repeat (it counts its executions):
every item executed at most once, and the items in doubt are exactly those the dead worker had marked
dispatched (begun, never ended); every other item ran once. (The dead worker's server may still execute some of
those in doubt before it notices its parent is gone: that is why they are in doubt, not failed.)

On a loaded machine a live worker's heartbeat can come later than the heartbeat timeout (2 s here): Temporal
then gives its batch to another attempt, and what that worker had begun is in doubt as well (correctly: it may
have run). The test allows exactly that, from the history's attempt counts, and says so in its output. When it
fails it prints what the run went through: the markers seen, the batches' attempts, the run's output, its
journal (``export``), the workers' stderr and the executions counted."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runner.temporal.spec import CHILD_ITEMS_VARIABLE
from tests.temporal.support import (
    ROOT,
    WORKER_LOGS,
    batch_attempts,
    cli,
    dev_server,
    dispatched_by_worker,
    fan_out_workflow,
    lost_under_load,
    start_worker,
    summary_of,
    target_of,
)

pytestmark = pytest.mark.slow

ITEMS = 120
CONCURRENCY = 8  # the workflow's max_concurrency (tests.temporal.support.fan_out_workflow)


@pytest.mark.parametrize(
    ("how", "child_items"), [("kill", None), ("stop", None), ("kill", 50)], ids=["kill", "stop", "kill-in-a-child"]
)
def test_a_worker_lost_mid_batch_duplicates_nothing(tmp_path: Path, how: str, child_items: int | None) -> None:
    """``kill``: kill -9. ``stop``: SIGSTOP, a zombie that wakes up (SIGCONT) once its activities were tried
    again elsewhere: its next dispatches need a heartbeat Temporal no longer accepts, so none goes out.
    ``kill-in-a-child``: kill -9 while the fan-out runs as child workflows of at most 50 calls (three): the
    items in doubt in the children are those of the run, decided in it."""
    gate, counts = tmp_path / "gate", tmp_path / "counts"
    workflow = fan_out_workflow(tmp_path, ITEMS, mode="count", extra=f"--count-file {counts} --gate {gate}")
    keys = {f"k{i:04d}" for i in range(ITEMS)}

    seen: dict[str, Any] = {}  # what the run went through, reported when an assertion fails

    async def scenario() -> tuple[int, dict[str, Any], set[str], set[str], list[str], tuple[int, str, str]]:
        async with dev_server() as env:
            address = target_of(env)
            workers = [await start_worker(address, "kill"), await start_worker(address, "kill")]
            knob = {CHILD_ITEMS_VARIABLE: str(child_items)} if child_items else {}
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "runner", str(workflow), "--engine", "temporal", "--temporal-address", address,
                "--task-queue", "kill", "--json", "--batch-size", "20", "--heartbeat-timeout", "2",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env={**os.environ, **knob},
            )  # fmt: skip
            where = ("--temporal-address", address, "--task-queue", "kill")
            run_id = ""
            try:
                assert run.stderr is not None
                first = (await asyncio.wait_for(run.stderr.readline(), 30)).decode()
                run_id = first.split()[1]
                from runner.temporal.client import workflow_id

                handle = env.client.get_workflow_handle(workflow_id(run_id))
                # The workers that took batches hold calls in flight, as many as the server's max_concurrency (their
                # servers wait for the gate, so no more go out): the markers recorded are those of every call begun.
                # Usually both took some; Temporal may give every batch to one (a live worker keeps what it took),
                # which is waited out for a while, then taken as it is: the other worker takes over from the victim.
                started = time.monotonic()
                while True:
                    marked = await dispatched_by_worker(handle, env.client)
                    full = bool(marked) and all(len(k) == CONCURRENCY for k in marked.values())
                    if full and (len(marked) == 2 or time.monotonic() > started + 15):
                        break
                    assert time.monotonic() < started + 60, marked
                    await asyncio.sleep(0.1)
                seen["marked"] = {w: sorted(k) for w, k in marked.items()}
                if child_items:  # the calls in flight are in child workflows, all three open (the gate holds them)
                    children = (await handle.describe()).raw_description.pending_children
                    assert len(children) == 3, children
                victim = next(w for w in workers if any(m.startswith(f"{w.pid}@") for m in marked))
                identity = next(w for w in marked if w.startswith(f"{victim.pid}@"))
                seen["victim"] = identity
                if how == "kill":
                    os.kill(victim.pid, signal.SIGKILL)
                    await victim.wait()
                else:
                    os.kill(victim.pid, signal.SIGSTOP)
                begun = marked[identity]
                gate.touch()
                out, err = await asyncio.wait_for(run.communicate(), 120)
                seen["run"] = (run.returncode, out.decode(), err.decode())
                assert run.returncode is not None
                batches = await batch_attempts(handle, env.client)
                retried = lost_under_load(batches, marked[identity])
                seen["batches"] = [(sorted(keys), attempts) for keys, attempts in batches]
                if how == "stop":
                    os.kill(victim.pid, signal.SIGCONT)  # the zombie wakes up, its activities long given away
                    await asyncio.sleep(3)  # (real time: what it would send, it sends now)
                before = counts.read_text().split()
                # The run waits for a decision: --rerun-in-doubt calls those items again and finishes it.
                resumed = await cli("resume", run_id, "--engine", "temporal", *where, "--rerun-in-doubt", "--json")
                seen["resumed"] = resumed
                return run.returncode, summary_of(out.decode()), begun, retried, before, resumed
            finally:
                if run_id:  # the run's events, while a worker can still answer
                    seen["journal"] = (await cli("export", run_id, "--engine", "temporal", *where, timeout=60))[1:]
                if run.returncode is None:
                    run.kill()
                    await run.wait()
                for proc in workers:
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGCONT)
                        proc.send_signal(signal.SIGINT)
                        await asyncio.wait_for(proc.wait(), 30)
                seen["workers"] = {proc.pid: "".join(WORKER_LOGS.get(proc.pid, [])) for proc in workers}

    try:
        code, summary, begun, retried, executed, (resumed_code, resumed_out, resumed_err) = asyncio.run(scenario())
        _check(keys, counts, code, summary, begun, retried, executed, resumed_code, resumed_out, resumed_err)
        # `export` replays the history: the decision (an Update) and the attempt after it are in the journal
        types = [json.loads(line)["type"] for line in seen["journal"][0].splitlines()]
        assert types.index("run_stopped") < types.index("run_resumed") < len(types) - 1, types
        assert types[-1] == "run_finished" and types.count("item_succeeded") == len(keys), types
    except BaseException:
        seen["counts"] = counts.read_text().split() if counts.exists() else None
        report = tmp_path / "report.json"
        report.write_text(json.dumps(seen, indent=1, default=str))
        print(f"what the run went through ({report}):\n{report.read_text()}")
        raise


def _check(
    keys: set[str],
    counts: Path,
    code: int,
    summary: dict[str, Any],
    begun: set[str],
    retried: set[str],
    executed: list[str],
    resumed_code: int,
    resumed_out: str,
    resumed_err: str,
) -> None:
    in_doubt = {d["item"] for d in summary["in_doubt"]}
    assert len(executed) == len(set(executed)), "an item ran twice"
    # What the lost worker had begun is in doubt, and nothing else, unless (on a loaded machine) a live worker's
    # heartbeat came too late and Temporal gave its batch to another attempt (it cannot tell slow from dead): then
    # what that worker had begun is in doubt too. `retried`: the items of such batches.
    assert begun and begun <= in_doubt <= begun | retried, (sorted(in_doubt), sorted(begun), sorted(retried))
    assert all(d["kind"] == "outcome-unknown" and "earlier attempt" in d["error"] for d in summary["in_doubt"])
    assert set(executed) >= keys - in_doubt  # every item not in doubt ran (once); those in doubt at most once
    assert code == 5
    assert summary["status"] == "in-doubt"
    assert summary["steps"]["call"]["succeeded"] == len(keys) - len(in_doubt)
    assert resumed_code == 0, resumed_err
    resumed = summary_of(resumed_out)
    assert resumed["status"] == "succeeded"
    assert resumed["steps"]["call"]["succeeded"] == len(keys)
    assert resumed["steps"]["call"]["reused"] == len(keys) - len(in_doubt)
    after = counts.read_text().split()
    assert set(after) == keys
    assert {k for k in after if after.count(k) > 1} <= in_doubt  # again only what the decision said to call again
    extra = sorted(in_doubt - begun)  # (a live worker's batch lost under load)
    print(json.dumps({"items": len(keys), "in_doubt": len(in_doubt), "executed": len(executed), "extra": extra}))


RECONCILED_ITEMS = 60


def test_a_worker_killed_mid_batch_leaves_items_its_reconcile_tool_settles_each_executed_once(tmp_path: Path) -> None:
    """kill -9 of a worker whose server executed one call (its answer held: ``--hold``) and holds seven more unread;
    the step has ``reconcile:``. Its batch's next attempt, on the other worker, calls what was never dispatched; at
    the step's end its reconcile tool settles the call that happened (``done``) and leaves the seven it says did not
    in doubt (a "not done" then is not acted on); ``resume`` with no decision asks again and calls them. Every item
    executed exactly once, with no decision given."""
    hold, counts = tmp_path / "hold", tmp_path / "counts"
    extra = f"--count-file {counts} --hold {hold}"
    workflow = fan_out_workflow(tmp_path, RECONCILED_ITEMS, mode="count", extra=extra, reconcile=True)
    keys = {f"k{i:04d}" for i in range(RECONCILED_ITEMS)}
    seen: dict[str, Any] = {}  # what the run went through, reported when an assertion fails

    async def scenario() -> tuple[set[str], set[str], tuple[int, str, str], tuple[int, str, str], str]:
        async with dev_server() as env:
            address = target_of(env)
            workers = [await start_worker(address, "kill-reconcile"), await start_worker(address, "kill-reconcile")]
            where = ("--temporal-address", address, "--task-queue", "kill-reconcile")
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "runner", str(workflow), "--engine", "temporal", *where, "--json",
                "--batch-size", "20", "--heartbeat-timeout", "2",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
            )  # fmt: skip
            run_id = ""
            try:
                assert run.stderr is not None
                run_id = (await asyncio.wait_for(run.stderr.readline(), 30)).decode().split()[1]
                from runner.temporal.client import workflow_id

                handle = env.client.get_workflow_handle(workflow_id(run_id))
                # The victim: a worker with its calls in flight (the server's max_concurrency) whose server executed
                # the first and holds its answer (the other calls wait unread). Whether the other worker took some
                # batches too does not matter: it takes the victim's over.
                started = time.monotonic()
                while True:
                    marked = await dispatched_by_worker(handle, env.client)
                    executed = set(counts.read_text().split()) if counts.exists() else set()
                    ready = [w for w, k in marked.items() if len(k) == CONCURRENCY and k & executed]
                    if ready:
                        break
                    assert time.monotonic() < started + 60, (marked, executed)
                    await asyncio.sleep(0.1)
                seen["marked"] = {w: sorted(k) for w, k in marked.items()}
                victim = next(w for w in workers if ready[0].startswith(f"{w.pid}@"))
                begun = marked[ready[0]]
                happened = begun & executed
                os.kill(victim.pid, signal.SIGKILL)
                await victim.wait()  # its server, reparented, executes nothing more and exits
                hold.touch()
                out, err = await asyncio.wait_for(run.communicate(), 120)
                first = seen["run"] = (run.returncode or 0, out.decode(), err.decode())
                resumed = seen["resumed"] = await cli("resume", run_id, "--engine", "temporal", *where, "--json")
                journal = seen["journal"] = (await cli("export", run_id, "--engine", "temporal", *where))[1]
                return begun, happened, first, resumed, journal
            finally:
                if run.returncode is None:
                    run.kill()
                    await run.wait()
                for proc in workers:
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGINT)
                        await asyncio.wait_for(proc.wait(), 30)
                seen["workers"] = {proc.pid: "".join(WORKER_LOGS.get(proc.pid, [])) for proc in workers}

    try:
        begun, happened, (code, out, err), (resumed_code, resumed_out, resumed_err), journal = asyncio.run(scenario())
        executed = counts.read_text().split()
        assert sorted(executed) == sorted(keys), "every item executed exactly once"
        assert len(happened) == 1, happened  # the victim's server executed its first call, then was held
        assert code == 5, err
        in_doubt = {d["item"] for d in summary_of(out)["in_doubt"]}
        # What the victim had begun is in doubt but the call that happened, settled at the step's end; (on a
        # loaded machine a live worker's batch may be given to another attempt too: its begun items in doubt)
        assert begun - happened <= in_doubt and not in_doubt & happened, (sorted(in_doubt), sorted(begun))
        assert resumed_code == 0, resumed_err
        resumed = summary_of(resumed_out)
        assert resumed["status"] == "succeeded" and resumed["steps"]["call"]["succeeded"] == len(keys)
        events = [json.loads(line) for line in journal.splitlines() if line.strip()]
        resumed_at = [e["type"] for e in events].index("run_resumed")
        verdicts = [(i, e["item"], e["verdict"]) for i, e in enumerate(events) if e["type"] == "item_reconciled"]
        assert [(i < resumed_at, verdict) for i, item, verdict in verdicts if item in happened] == [(True, "done")]
        settled = {item for i, item, verdict in verdicts if i > resumed_at and verdict in ("done", "not-done")}
        assert settled == in_doubt, (sorted(settled), sorted(in_doubt))  # each settled by asking, on resume
        assert not [e for e in events if e["type"] == "doubt_decided"]
        print(json.dumps({"items": len(keys), "in_doubt": len(in_doubt), "extra": sorted(in_doubt - begun)}))
    except BaseException:
        seen["counts"] = counts.read_text().split() if counts.exists() else None
        report = tmp_path / "report.json"
        report.write_text(json.dumps(seen, indent=1, default=str))
        print(f"what the run went through ({report}):\n{report.read_text()}")
        raise
