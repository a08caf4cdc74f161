"""Helpers shared by the end-to-end tests: ``mcp-run`` as a subprocess, and its journal read from disk.

Each test gets its own folder (``tmp_path``) and keeps its runs in ``<tmp>/state`` (``--state-dir``) unless it
tests where runs are kept by default. The subprocesses run on the real clock, so every wait here is bounded
(a subprocess timeout or a deadline on a polling loop); nothing sleeps to wait for readiness.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: ``mcp_run`` runs there, and workflows name the test peers by paths under it."""
WORKFLOWS = ROOT / "workflows"
"""The example workflows."""
BIN = Path(sys.executable).parent
"""The test interpreter's scripts directory, put first on the subprocesses' PATH (``mcp-run`` itself)."""
MODES = ROOT / "tests" / "fakes" / "mcp_modes.py"
"""The stdio fake server whose behaviour is chosen by its first argument (its docstring lists the modes)."""
SDK_PEER = ROOT / "tests" / "peers" / "sdk_server.py"
"""The official SDK's test server: its ``count`` tool appends the item's key to a file (fsynced) once per
execution, the ground truth of what ran; ``counted`` says whether the file holds a key."""

OAUTH_SERVER = ROOT / "tests" / "fakes" / "oauth_server.py"
"""The loopback protected MCP server, its authorization server and an enterprise IdP (its docstring)."""
OAUTH_SECRET = "loopback-client-secret-4711"
"""The secret of the client ``ci-bot`` at :data:`OAUTH_SERVER`."""
OAUTH_ID_TOKEN = "eyJhbGciOiJFUzI1NiJ9.alice-signed-in-at-the-idp.c2ln"
"""The ID token :data:`OAUTH_SERVER`'s IdP exchanges for an ID-JAG (any other it refuses)."""


def environment() -> dict[str, str]:
    """The test's environment with :data:`BIN` first on PATH."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def environment_without_state_dir() -> dict[str, str]:
    """:func:`environment` without ``MCP_RUN_STATE_DIR``: runs are kept where mcp-run keeps them by default."""
    values = environment()
    values.pop("MCP_RUN_STATE_DIR", None)
    return values


def mcp_run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``mcp-run ARGS`` as a subprocess in :data:`ROOT`, stdin closed, output captured; ``env`` is added to the
    test's environment (without ``MCP_RUN_STATE_DIR``)."""
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    full_env.pop("MCP_RUN_STATE_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def run_cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``mcp-run ARGS`` as a subprocess in ``cwd``, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def journal_path(tmp: Path) -> Path | None:
    """The journal of the run kept in ``<tmp>/state`` (the first found), or None before there is one."""
    found = list((tmp / "state" / "runs").glob("*/journal.jsonl")) if (tmp / "state" / "runs").exists() else []
    return found[0] if found else None


def journal_events(tmp: Path) -> list[dict[str, Any]]:
    """The complete lines of the journal in ``<tmp>/state``, decoded (a torn last line is left out)."""
    path = journal_path(tmp)
    assert path is not None
    data = path.read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def run_and_kill_at(tmp: Path, args: list[str], lines: int) -> None:
    """Start the runner and SIGKILL it once its journal has at least ``lines`` lines."""
    proc = subprocess.Popen(args, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            path = journal_path(tmp)
            if path is not None and path.read_bytes().count(b"\n") >= lines:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)  # polling a file another process writes; bounded by the deadline
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def write_slow_workflow(tmp: Path, items: int = 6) -> Path:
    """``<tmp>/slow.yaml``: ``items`` calls of the SDK peer's ``slow`` tool (about 3 s each), two at a time, so
    a test can act while calls are in flight (a test that needs the run alive whatever the machine's load
    asks for many and kills the run)."""
    workflow = tmp / "slow.yaml"
    workflow.write_text(
        f"""
version: 1
servers:
  peer:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(ROOT / "tests/peers/sdk_server.py"))}, stdio]
inputs:
  items: {{type: array, default: {json.dumps(list(range(1, items + 1)))}}}
steps:
  each:
    server: peer
    tool: slow
    for_each: ${{{{ inputs.items }}}}
    concurrency: 2
    args: {{steps: 10, delay: 0.3}}
"""
    )
    return workflow


def wait_for_dispatches(tmp: Path, n: int) -> None:
    """Wait (30 s at most) until the journal in ``<tmp>/state`` records ``n`` dispatches."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        path = journal_path(tmp)
        if path is not None and path.read_bytes().count(b'"item_dispatched"') >= n:
            return
        time.sleep(0.01)  # polling a file another process writes; bounded
    raise AssertionError("the runner never dispatched")


@contextmanager
def oauth_server(tmp: Path) -> Iterator[tuple[str, Path]]:
    """:data:`OAUTH_SERVER` on a loopback port of its choosing, until the block ends: its origin
    (``http://127.0.0.1:PORT``), and the file it appends every token it issues to (``<tmp>/issued-tokens.txt``),
    so a test can look for them where they must not be."""
    tokens = tmp / "issued-tokens.txt"
    env = {
        **os.environ,
        "OAUTH_TEST_SECRET": OAUTH_SECRET,
        "OAUTH_TEST_TOKENS": str(tokens),
        "OAUTH_TEST_ID_TOKEN": OAUTH_ID_TOKEN,
    }
    process = subprocess.Popen(
        [sys.executable, str(OAUTH_SERVER)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        origin = process.stdout.readline().strip()
        assert origin.startswith("http://127.0.0.1:"), origin
        yield origin, tokens
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def everything_written(tmp: Path) -> str:
    """The text of every file in ``<tmp>/state`` (a run's journal, results, reports), joined."""
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace") for path in (tmp / "state").rglob("*") if path.is_file()
    )


def counting_peer(count_file: Path, *, max_concurrency: int, guard: Path | None = None) -> str:
    """The YAML of server ``peer`` (under ``servers:``): :data:`SDK_PEER` over stdio, counting into
    ``count_file``; ``guard``: it starts only while that file exists (a test removes it to make the server
    unreachable)."""
    command = [sys.executable, str(SDK_PEER), "stdio", "--count-file", str(count_file)]
    if guard is not None:
        command = ["sh", "-c", 'test -e "$0" && exec "$@"', str(guard), *command]
    return f"  peer:\n    command: {json.dumps(command)}\n    max_concurrency: {max_concurrency}\n"


KEY_ARGS = '{key: "${{ item }}"}'
"""The arguments of a ``count`` call: the item as its key."""


def count_fan_out(tmp: Path, items: list[str], *, peer: str, args: str = KEY_ARGS, step_extra: str = "") -> Path:
    """``<tmp>/batch.yaml``: step ``each`` calls server ``peer``'s ``count`` once per item of input ``items``
    (written to ``<tmp>/inputs.json``, for ``--inputs-file``), keyed by the item, with ``args`` and the step's
    ``step_extra`` lines; ``peer``: the server's YAML (:func:`counting_peer`)."""
    (tmp / "inputs.json").write_text(json.dumps({"items": items}))
    workflow = tmp / "batch.yaml"
    workflow.write_text(
        f"""version: 1
servers:
{peer}inputs:
  items: {{type: array}}
steps:
  each:
    server: peer
    tool: count
    for_each: ${{{{ inputs.items }}}}
    key: ${{{{ item }}}}
    args: {args}
{step_extra}"""
    )
    return workflow


@contextmanager
def throttled_server(rate: float = 20, burst: int = 5, retry_after: float = 1) -> Iterator[str]:
    """:mod:`tests.fakes.throttled_http` on loopback (``rate`` calls a second, ``burst`` saved, the rest answered 429
    with ``Retry-After: retry_after``): its MCP URL (its ``/stats`` beside it) while the block runs."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.throttled_http", "--rate", str(rate), "--burst", str(burst),
         "--retry-after", str(retry_after)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # printed once it accepts connections (or empty if it died)
        found = re.search(r"http://\S+", line)
        assert found, line
        yield found.group(0)
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
