"""Size and time of ``mcp-run report`` for a large run: a journal of N items synthesized with the project's own
writer (:class:`~runner.engine.journal.writer.EventLog`), then reported in a fresh process.

    .venv/bin/python -m tests.benchmarks.report_size                 # 100,000 items
    .venv/bin/python -m tests.benchmarks.report_size --items 20000

The run: two fan-outs on two servers (60% and 40% of the items), 16 calls in flight on each, 2% of the calls
failing with one of 10 errors, 0.5% retried once, 50 left in doubt. Reported: the journal's size, then for
``--html``, ``--junit``, ``--markdown`` (each alone) and the three together: wall time, CPU time and peak RSS of
the ``mcp-run report`` process, and the size of what it wrote; and ``mcp-run show --json`` of the same run, which
reads the journal the same way, for reference.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from runner.engine.core.events import (
    JOURNAL_FORMAT,
    AnyEvent,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    RunStarted,
    RunStopped,
    SessionOpened,
    StepFinished,
    StepStarted,
)
from runner.engine.core.vocabulary import FailureKind, RunStatus, StepStatus
from runner.engine.journal.writer import EventLog, Masker

RUN_ID = "20261203T120000.000000Z-bigrun"
CONCURRENCY = 16


def _events(n: int) -> list[AnyEvent]:
    out: list[AnyEvent] = [
        RunStarted(run_id=RUN_ID, workflow="/srv/big.yaml", workflow_hash="h", inputs={"token": "***env.TOKEN***"},
                   pid=1, journal=JOURNAL_FORMAT),
    ]  # fmt: skip
    for server in ("s1", "s2"):
        out.append(SessionOpened(server=server, protocol_version="2025-11-25", server_info={"name": server}))
    request = 0
    for step, server, count in (("convert", "s1", n * 6 // 10), ("upload", "s2", n - n * 6 // 10)):
        out.append(StepStarted(step=step, items=count))
        window: list[tuple[str, int]] = []
        for i in range(count):
            key = f"{step}-{i:06d}"
            request += 1
            out.append(_dispatch(step, key, i, server, request, 1))
            window.append((key, i))
            if len(window) >= CONCURRENCY:
                request = _answer(out, step, server, *window.pop(0), request)
        while window:
            request = _answer(out, step, server, *window.pop(0), request)
        out.append(StepFinished(step=step, status=StepStatus.FAILED, counts={}))
    out.append(RunStopped(status=RunStatus.IN_DOUBT, exit_code=5))
    return out


def _dispatch(step: str, key: str, index: int, server: str, request: int, attempt: int) -> ItemDispatched:
    return ItemDispatched(step=step, item=key, index=index, server=server, tool="work", request_id=request,
                          progress_token=request, attempt=attempt)  # fmt: skip


def _answer(out: list[AnyEvent], step: str, server: str, key: str, index: int, request: int) -> int:
    if index % 200 == 7:  # retried once
        out.append(ItemFailed(step=step, item=key, index=index, kind=FailureKind.NOT_SENT, error="connection refused",
                              retrying=True))  # fmt: skip
        request += 1
        out.append(_dispatch(step, key, index, server, request, 2))
    if index % 50 == 3:
        out.append(ItemFailed(step=step, item=key, index=index, kind=FailureKind.TOOL_ERROR,
                              error=f"error {index % 10}: the input could not be converted"))  # fmt: skip
    elif step == "upload" and index % 800 == 11:
        out.append(ItemFailed(step=step, item=key, index=index, kind=FailureKind.TIMEOUT, error="no result"))
    else:
        out.append(ItemSucceeded(step=step, item=key, index=index, result={"content": [{"type": "text", "text": key}]}))
    return request


def write_journal(path: Path, n: int) -> None:
    async def main() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

        async def inline(fn: Any, *args: Any) -> None:
            fn(*args)

        log = EventLog(fd, start_seq=0, masker=Masker({}), offload=inline, fsync=False)
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            for event in _events(n):
                log.append(event)
                await trio.lowlevel.checkpoint_if_cancelled()
            log.close()
        os.close(fd)

    trio.run(main)


def _measure(argv: list[str]) -> tuple[float, float, int]:
    code = (
        "import resource, sys, time\n"
        "t = time.perf_counter()\n"
        "from runner.cli import main\n"
        f"rc = main({argv!r})\n"
        "u = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss)\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"mcp-run {argv} failed:\n{result.stderr}")
    wall, cpu, rss = result.stdout.strip().splitlines()[-1].split()  # after what the command printed
    return float(wall), float(cpu), int(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        run = state / "runs" / RUN_ID
        run.mkdir(parents=True)
        started = time.perf_counter()
        write_journal(run / "journal.jsonl", args.items)
        size = (run / "journal.jsonl").stat().st_size
        print(f"journal: {args.items:,} items, {size / 1e6:.1f} MB, written in {time.perf_counter() - started:.1f} s")
        wall, cpu, rss = _measure(["show", RUN_ID, "--state-dir", str(state), "--json"])
        print(f"{'show':>10}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss / 1024:.0f} MB (the same journal read)")
        outputs = {"html": state / "r.html", "junit": state / "r.xml", "markdown": state / "r.md"}
        for label, chosen in [(k, [k]) for k in outputs] + [("all three", list(outputs))]:
            argv = ["report", RUN_ID, "--state-dir", str(state)]
            for kind in chosen:
                argv += [f"--{kind}", str(outputs[kind])]
            wall, cpu, rss = _measure(argv)
            sizes = ", ".join(f"{k} {outputs[k].stat().st_size / 1e3:,.0f} kB" for k in chosen)
            print(f"{label:>10}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss / 1024:.0f} MB; {sizes}")


if __name__ == "__main__":
    main()
