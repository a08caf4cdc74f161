"""The executors' conformance table: each scenario is a small workflow over one scripted fake server
(``tests/fakes/conformance_server.py``), run with ``mcp-run FILE --json`` on the local engine and with
``--engine temporal`` on a Temporal dev server, and what each engine reports (exit code, each step's status and
counts, how many times the tool ran per key) is set side by side. The test
(``test_executors_conformance.py``) asserts the two agree; ``python -m tests.temporal.conformance`` prints the
table ``scenario | local | temporal`` as it is today (a dev server and a worker of its own).

Why the CLI and its ``--json`` summary: it is the one machine-readable answer both engines give, so the table
compares what a user sees, not either executor's insides.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fakes" / "conformance_server.py"
QUEUE = "conformance"
TIMEOUT = 120.0

T = TypeVar("T")


@dataclass(frozen=True)
class Scenario:
    """One row: the workflow's steps (YAML lines under ``steps:``; servers ``svc``, ``fragile``, which is not
    restarted once it exits, and ``down``, which refuses every connection; an input ``flag``, false),
    the resume decision made after the first run (none: one run), and what must hold on both engines whatever
    else they agree on: the last exit code and the tool's executions per key."""

    name: str
    steps: str
    exit_code: int
    runs: dict[str, int]
    decision: str | None = None


FAN_OUT = "for_each: [k1, k2, k3], key: '${{ item }}', args: {key: '${{ item }}'}"
ONE_FAILS = "for_each: [k1, err1], key: '${{ item }}', args: {key: '${{ item }}'}"
IN_DOUBT = """\
  a: {server: fragile, tool: act, args: {key: doubt1}}
  b: {server: svc, tool: act, needs: [a], args: {key: after}}
"""
AFTER_A_FAILS = """\
  a: {server: svc, tool: act, args: {key: err1}}
  b: {server: svc, tool: act, needs: [a], args: {key: b1}}
  c: {server: svc, tool: act, needs: [a], if: '${{ always() }}', args: {key: c1}}
  d: {server: svc, tool: act, needs: [a], if: '${{ failure() }}', args: {key: d1}}
"""

RECONCILED = """\
  a:
    server: svc
    tool: act
    args: {key: doubt1}
    reconcile: {tool: ran, args: {key: '${{ args.key }}'}, done: '${{ result.json.ran }}', idempotent: true}
  b: {server: svc, tool: act, needs: [a], args: {key: after}}
"""

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("success-one-step", "  a: {server: svc, tool: act, args: {key: one}}\n", 0, {"one": 1}),
    Scenario(
        "success-fan-out",
        f"  a: {{server: svc, tool: act, {FAN_OUT}}}\n  b: {{server: svc, tool: act, needs: [a], args: {{key: b1}}}}\n",
        0,
        {"k1": 1, "k2": 1, "k3": 1, "b1": 1},
    ),
    Scenario(
        "tool-error",
        f"  a: {{server: svc, tool: act, {ONE_FAILS}}}\n"
        """\
  b: {server: svc, tool: act, needs: [a], args: {key: b1}}
""",
        1,
        {"k1": 1, "err1": 1},
    ),
    Scenario(
        "not-sent",
        """\
  a: {server: down, tool: act, args: {key: never}}
  b: {server: svc, tool: act, needs: [a], args: {key: b1}}
""",
        4,
        {},
    ),
    Scenario("in-doubt", IN_DOUBT, 5, {"doubt1": 1}),
    Scenario(
        "skipped-by-if",
        """\
  a: {server: svc, tool: act, if: '${{ inputs.flag }}', args: {key: a1}}
  b: {server: svc, tool: act, needs: [a], args: {key: b1}}
  c: {server: svc, tool: act, args: {key: c1}}
""",
        0,
        {"c1": 1},
    ),
    Scenario("always-and-failure", AFTER_A_FAILS, 1, {"err1": 1, "c1": 1, "d1": 1}),
    Scenario(
        "continue-on-error",
        f"  a: {{server: svc, tool: act, continue_on_error: true, {ONE_FAILS}}}\n"
        """\
  b: {server: svc, tool: act, needs: [a], args: {key: b1}}
  c: {server: svc, tool: act, needs: [a], if: '${{ failure() }}', args: {key: c1}}
""",
        0,
        {"k1": 1, "err1": 1, "b1": 1},
    ),
    Scenario("resume-rerun", IN_DOUBT, 0, {"doubt1": 2, "after": 1}, "--rerun-in-doubt"),
    Scenario("resume-skip", IN_DOUBT, 1, {"doubt1": 1}, "--skip-in-doubt"),
    Scenario("resume-accept", IN_DOUBT, 0, {"doubt1": 1, "after": 1}, "--accept-in-doubt"),
    Scenario("reconciled-at-step-end", RECONCILED, 0, {"doubt1": 1, "after": 1}),
)

COUNTS = ("succeeded", "failed", "in_doubt", "skipped", "reused", "reconciled")
"""A step's counts in the ``--json`` summary, beside its ``total``."""


@dataclass(frozen=True)
class StepSeen:
    """One step of a ``--json`` summary: its status, item total, counts (as :data:`COUNTS`) and skip cause."""

    status: str
    total: int
    counts: tuple[int, ...]
    cause: str

    @classmethod
    def of(cls, step: dict[str, Any]) -> StepSeen:
        counts = tuple(int(step.get(count, -1)) for count in COUNTS)
        return cls(str(step.get("status")), int(step.get("total", -1)), counts, str(step.get("cause", "")))

    def text(self) -> str:
        """``failed (2: 1 succeeded, 1 failed)``, ``skipped (if-false)``."""
        if self.total:
            some = [f"{n} {what}" for what, n in zip(COUNTS, self.counts, strict=True) if n]
            return f"{self.status} ({self.total}: {', '.join(some) or 'in no column'})"
        return f"{self.status} ({self.cause})" if self.cause else self.status


@dataclass(frozen=True)
class Seen:
    """What one engine reported for a scenario: the exit code of each command (the run, then the resume), each
    step's status, counts and skip cause in the last summary, the run's status and its items failed or in doubt
    (list, step, item key, kind), the tool's executions per key, and how many times the refusing server
    (``down``) was started."""

    exit_codes: tuple[int, ...]
    status: str
    steps: dict[str, StepSeen]
    problems: tuple[tuple[str, str, str, str], ...]
    runs: dict[str, int]
    refused: int
    errors: str = field(default="", compare=False)

    def cell(self) -> str:
        """The table's cell: ``exit 5->0 (succeeded); a succeeded (1: 1 succeeded); ...; ran after doubt1x2``."""
        parts = ["exit " + "->".join(str(code) for code in self.exit_codes) + f" ({self.status})"]
        parts += [f"{name} {step.text()}" for name, step in self.steps.items()]
        parts += [f"{which} {step}[{item}] {kind}" for which, step, item, kind in self.problems]
        ran = " ".join(key if n == 1 else f"{key}x{n}" for key, n in sorted(self.runs.items()))
        refused = f"; server refused {self.refused}x" if self.refused else ""
        return "; ".join(parts) + f"; ran {ran or 'nothing'}{refused}"


def workflow(folder: Path, scenario: Scenario) -> tuple[Path, Path]:
    """The scenario's workflow file in ``folder`` and the count file its server writes."""
    folder.mkdir(parents=True, exist_ok=True)
    counts = folder / "counts.txt"
    act = json.dumps([sys.executable, str(SERVER), "--count-file", str(counts)])
    down = json.dumps([sys.executable, str(SERVER), "--count-file", str(counts), "--refuse"])
    servers = {
        "svc": f"  svc: {{command: {act}}}\n",
        "fragile": f"  fragile: {{command: {act}, reconnect: false}}\n",
        "down": f"  down: {{command: {down}, reconnect: false}}\n",
    }
    used = "".join(text for name, text in servers.items() if f"server: {name}" in scenario.steps)
    path = folder / f"{scenario.name}.yaml"
    inputs = "inputs:\n  flag: {type: boolean, default: false}\n"
    path.write_text(f"version: 1\nname: {scenario.name}\n{inputs}servers:\n{used}steps:\n{scenario.steps}")
    return path, counts


def _mcp_run(*args: str) -> tuple[int, dict[str, Any], str]:
    """``mcp-run ARGS --json``: (exit code, the summary, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "runner", *args, "--json"],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "MCP_RUN_STATE_DIR"},
    )  # fmt: skip
    try:
        summary: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        summary = {}
    return done.returncode, summary, done.stderr


def _seen(results: list[tuple[int, dict[str, Any], str]], counts: Path) -> Seen:
    _code, summary, _err = results[-1]
    steps = {name: StepSeen.of(step) for name, step in summary.get("steps", {}).items()}
    problems = sorted(
        (which, str(item.get("step")), str(item.get("item")), str(item.get("kind")))
        for which in ("failed", "in_doubt")
        for item in summary.get(which, [])
    )
    runs = Counter(counts.read_text().split()) if counts.exists() else Counter()
    refused = runs.pop("!refused", 0)
    errors = "\n".join(err[-1500:] for _c, _s, err in results)
    codes = tuple(code for code, _s, _e in results)
    return Seen(codes, str(summary.get("status")), steps, tuple(problems), dict(runs), refused, errors)


def run_local(folder: Path, scenario: Scenario) -> Seen:
    path, counts = workflow(folder, scenario)
    state = ("--state-dir", str(folder / "state"))
    results = [_mcp_run(str(path), *state)]
    run_id = results[0][1].get("run_id")
    if scenario.decision is not None and run_id:
        results.append(_mcp_run("resume", run_id, *state, scenario.decision))
    return _seen(results, counts)


def run_temporal(folder: Path, scenario: Scenario, address: str) -> Seen:
    path, counts = workflow(folder, scenario)
    where = ("--engine", "temporal", "--temporal-address", address)
    results = [_mcp_run(str(path), *where, "--task-queue", QUEUE)]
    run_id = results[0][1].get("run_id")
    if scenario.decision is not None and run_id:
        results.append(_mcp_run("resume", run_id, *where, scenario.decision))
    return _seen(results, counts)


def run_both(folder: Path, scenario: Scenario, address: str) -> tuple[Seen, Seen]:
    """The scenario on each engine, side by side (each in its own folder, with its own count file)."""
    with ThreadPoolExecutor(2) as pool:
        local = pool.submit(run_local, folder / "local", scenario)
        temporal = pool.submit(run_temporal, folder / "temporal", scenario, address)
        return local.result(), temporal.result()


class Background:
    """An asyncio loop in a thread of its own, which holds the dev server and the worker across a module's
    tests (each test runs plain subprocesses; nothing of theirs waits on this loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="conformance-temporal", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


@contextmanager
def temporal_service() -> Iterator[str]:
    """A Temporal dev server and one ``mcp-run worker`` subprocess on :data:`QUEUE`: the server's address."""
    from tests.temporal.support import dev_server, start_worker, target_of

    background = Background()
    stack = AsyncExitStack()
    try:
        env = background.run(stack.enter_async_context(dev_server()))
        address = target_of(env)
        worker = background.run(start_worker(address, QUEUE))
        try:
            yield address
        finally:
            worker.send_signal(signal.SIGINT)
            background.run(asyncio.wait_for(worker.wait(), 30))
    finally:
        background.run(stack.aclose())
        background.close()


def table(rows: list[tuple[str, Seen, Seen]]) -> str:
    """``scenario | local | temporal`` as a Markdown table; a row whose engines differ is marked."""
    lines = ["| scenario | local | temporal |", "|---|---|---|"]
    for name, local, temporal in rows:
        mark = "" if local == temporal else " **(differs)**"
        lines.append(f"| {name}{mark} | {local.cell()} | {temporal.cell()} |")
    return "\n".join(lines)


def main() -> None:
    import tempfile

    rows: list[tuple[str, Seen, Seen]] = []
    with tempfile.TemporaryDirectory() as tmp, temporal_service() as address:
        for scenario in SCENARIOS:
            local, temporal = run_both(Path(tmp) / scenario.name, scenario, address)
            rows.append((scenario.name, local, temporal))
    print(table(rows))


if __name__ == "__main__":
    main()
