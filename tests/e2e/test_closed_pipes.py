"""A run whose output nobody reads any more (``mcp-run FILE 2>&1 | head``) still runs to its end and exits with
its own code. Before, the first line written after the reader left raised BrokenPipeError: the run stopped
with its calls cut, and the command exited 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import MODES, environment_without_state_dir

pytestmark = pytest.mark.integration


def workflow(tmp: Path, mode: str, items: int, *extra: str) -> Path:
    path = tmp / "wf.yaml"
    command = json.dumps([sys.executable, str(MODES), mode, *extra])
    path.write_text(
        f"""version: 1
servers:
  modes:
    command: {command}
    max_concurrency: 1
steps:
  each:
    server: modes
    tool: {"count" if mode == "count" else "echo"}
    for_each: {json.dumps([f"k{i}" for i in range(items)])}
    key: "${{{{ item }}}}"
    args: {{key: "${{{{ item }}}}", text: hi}}
    timeout: 0.5
outputs:
  n: ${{{{ length(steps.each.results) }}}}
"""
    )
    return path


def run_unread(tmp: Path, path: Path, *flags: str) -> int:
    """Run with stdout and stderr pipes whose read ends are closed at once; the exit code."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", str(path), *flags],
        env=environment_without_state_dir(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=tmp,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()
    return proc.wait(timeout=120)


@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_every_item_runs_and_the_exit_code_is_the_runs(tmp_path: Path, flags: tuple[str, ...]) -> None:
    count = tmp_path / "count.txt"
    path = workflow(tmp_path, "count", 30, "--count-file", str(count))
    assert run_unread(tmp_path, path, *flags) == 0
    assert sorted(count.read_text().split()) == sorted(f"k{i}" for i in range(30))


def test_a_run_in_doubt_exits_5_unread(tmp_path: Path) -> None:
    path = workflow(tmp_path, "silent", 1)
    assert run_unread(tmp_path, path) == 5


def test_an_error_with_json_to_a_closed_pipe_keeps_its_exit_code(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "missing.yaml", "--json"],
        env=environment_without_state_dir(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "Traceback" not in err, err
