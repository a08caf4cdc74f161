"""What the benchmarks share: where things are, the fan-out workflow, running a child process for its CPU, a
server on HTTP, bytecode cached as for an installed program, and the row of a target."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
MCP_RUN = str(Path(PY).with_name("mcp-run"))
ECHO = [PY, str(REPO / "tests" / "benchmarks" / "echo_server.py")]
HTTP_ECHO = [PY, "-m", "tests.benchmarks.http_echo_server"]
URL_RE = re.compile(r"(http://\S+/mcp)")
TICK = os.sysconf("SC_CLK_TCK")


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of the running process ``pid`` (its children not included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def bytecode_env(folder: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with compiled bytecode cached in ``folder``, even where
    the environment says not to write it: every process of a benchmark then starts as an installed program
    does (the SDK from its site-packages, mcp-run's editable install from this cache), once the cache is warm."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def target_row(name: str, value: float | None, limit: float, unit: str, at_most: bool = True) -> list[dict[str, Any]]:
    """A target of the tables: ``value`` against ``limit`` (none when the value was not measured)."""
    if value is None:
        return []
    ok = value <= limit if at_most else value >= limit
    return [{"target": name, "value": value, "limit": limit, "unit": unit, "met": ok, "at_most": at_most}]


# -- processes -------------------------------------------------------------------------------------


@contextmanager
def http_server_process(argv: list[str]) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start a server that prints its URL on stderr; yield the URL and the process; stop it."""
    proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline().decode()
        match = URL_RE.search(line)
        if not match:
            raise RuntimeError(f"server {argv} did not print its URL: {line!r}")
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its stderr pipe from filling
        yield match.group(1), proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def http_server(argv: list[str]) -> Iterator[str]:
    """Start a server that prints its URL on stderr; yield the URL; stop it."""
    with http_server_process(argv) as (url, _):
        yield url


def timed_child_cpu(argv: list[str], **kwargs: Any) -> tuple[float, int, str, int, float]:
    """Run ``argv``; return wall seconds, exit code, stdout, peak RSS in KiB and CPU seconds (user + system),
    both of the child and the children it reaped (from wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read())),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err.append(proc.stderr.read())),  # type: ignore[union-attr]
    ]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    for t in readers:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and err and err[0]:
        sys.stderr.write(err[0].decode(errors="replace")[-2000:])
    cpu = usage.ru_utime + usage.ru_stime
    return wall, proc.returncode, out[0].decode() if out else "", usage.ru_maxrss, cpu


def timed_child(argv: list[str], **kwargs: Any) -> tuple[float, int, str, int]:
    """Run ``argv``; return wall seconds, exit code, stdout, and peak RSS in KiB (of the child and the
    children it reaped, from wait4)."""
    wall, code, out, rss, _ = timed_child_cpu(argv, **kwargs)
    return wall, code, out, rss


# -- the fan-out workflow --------------------------------------------------------------------------

FANOUT_YAML = """\
version: 1
servers:
  echo:
    {server}
    max_concurrency: {inflight}
steps:
  list:
    server: echo
    tool: range
    args: {{n: {items}}}
  fan:
    server: echo
    tool: echo
    for_each: ${{{{ steps.list.structured.items }}}}
    key: ${{{{ item }}}}
    args: {{text: "n${{{{ item }}}}"}}
    idempotent: {idempotent}
  done:
    server: echo
    tool: echo
    needs: [fan]
    args: {{text: done}}
"""


def fanout_yaml(server: list[str] | str, items: int, *, inflight: int = 64, idempotent: bool = True) -> str:
    """The fan-out workflow: a ``range`` step, ``items`` echo calls (``inflight`` at a time; ``idempotent: false``
    makes every dispatch wait for its fsync, the default durability of a call not safe to repeat), a last step.
    ``server`` is a stdio server's argv, or the URL of a Streamable HTTP one."""
    where = f"url: {json.dumps(server)}" if isinstance(server, str) else f"command: {json.dumps(server)}"
    return FANOUT_YAML.format(server=where, items=items, inflight=inflight, idempotent=str(idempotent).lower())
