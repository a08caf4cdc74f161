"""A run's identity is its workflow, not a path string (runner.engine.journal.rundir.WorkflowIdentity).

Each way of reaching a workflow that has an open run -- its folder moved, a new release directory beside a
shared state directory, a hard link, a symlink, a bind mount, a rename with a ``name:`` -- finds that run
(``--resume`` continues it; a plain run is refused) and takes the same lock (a second invocation is busy while
one runs). Before, each of them started a new run and called every item again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.support import MODES, environment_without_state_dir

pytestmark = pytest.mark.integration


def write(folder: Path, *, mode: str = "silent", name: str | None = None, file: str = "wf.yaml", **extra: str) -> Path:
    """A workflow calling the fake server in ``mode``; ``silent`` never answers, so with ``timeout: 0.5`` the
    run stops with its item in doubt: an open run."""
    folder.mkdir(parents=True, exist_ok=True)
    command = json.dumps(
        [sys.executable, str(MODES), mode, *(a for kv in extra.items() for a in (f"--{kv[0]}", kv[1]))]
    )
    title = f"name: {name}\n" if name else ""
    path = folder / file
    path.write_text(
        f"""version: 1
{title}servers:
  modes:
    command: {command}
steps:
  each:
    server: modes
    tool: {"count" if mode == "count" else "echo"}
    for_each: ["a"]
    key: "${{{{ item }}}}"
    args: {{key: "${{{{ item }}}}", text: hi}}
    timeout: 0.5
"""
    )
    return path


def mcp_run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *map(str, args)],
        env={**environment_without_state_dir(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def open_run(workflow: Path, env: dict[str, str] | None = None) -> str:
    """Start a run of ``workflow`` that stops in doubt (open); its run id."""
    stopped = mcp_run(workflow, cwd=workflow.parent, env=env)
    assert stopped.returncode == 5, stopped.stderr
    found = re.search(r"^run (\S+) \(journal", stopped.stderr, re.M)
    assert found is not None, stopped.stderr
    return found.group(1)


def runs_in(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "runs").iterdir())


def check_same_run(other: Path, run_id: str, state: Path, env: dict[str, str] | None = None) -> None:
    """``other`` reaches the workflow whose open run is ``run_id`` (kept in ``state``): a plain run is refused,
    ``--resume`` continues that run, and no other run is made."""
    refused = mcp_run(other, cwd=other.parent, env=env)
    assert refused.returncode == 2, refused.stderr
    assert f"run {run_id} " in refused.stderr and "unfinished" in refused.stderr
    resumed = mcp_run(other, "--resume", cwd=other.parent, env=env)
    assert resumed.returncode == 5, resumed.stderr
    assert f"resuming run {run_id} " in resumed.stderr
    assert runs_in(state) == [run_id]


def test_a_moved_folder_keeps_its_open_run(tmp_path: Path) -> None:
    workflow = write(tmp_path / "project")
    run_id = open_run(workflow)
    shutil.move(tmp_path / "project", tmp_path / "moved")
    check_same_run(tmp_path / "moved" / "wf.yaml", run_id, tmp_path / "moved" / ".mcp-run")
    # `resume RUN_ID` from inside the moved folder finds its workflow beside its state directory.
    resumed = mcp_run("resume", run_id, cwd=tmp_path / "moved")
    assert resumed.returncode == 5 and f"resuming run {run_id} " in resumed.stderr, resumed.stderr


def test_a_new_release_directory_with_a_shared_state_dir_finds_the_open_run(tmp_path: Path) -> None:
    env = {"MCP_RUN_STATE_DIR": str(tmp_path / "state")}
    first = write(tmp_path / "releases" / "v1")
    run_id = open_run(first, env)
    second = tmp_path / "releases" / "v2"
    shutil.copytree(tmp_path / "releases" / "v1", second)  # a new inode, a new path: the same workflow
    check_same_run(second / "wf.yaml", run_id, tmp_path / "state", env)


def test_a_renamed_file_that_declares_a_name_finds_its_open_run(tmp_path: Path) -> None:
    env = {"MCP_RUN_STATE_DIR": str(tmp_path / "state")}
    first = write(tmp_path / "v1", name="nightly")
    run_id = open_run(first, env)
    renamed = tmp_path / "v2" / "nightly-batch.yaml"
    renamed.parent.mkdir()
    renamed.write_text(first.read_text())  # a copy under another file name: found by its name:
    check_same_run(renamed, run_id, tmp_path / "state", env)


@pytest.mark.parametrize("how", ["hard link", "symlink", "bind mount"])
def test_one_file_under_two_names_is_one_workflow(tmp_path: Path, how: str) -> None:
    workflow = write(tmp_path / "project")
    other = reach(workflow, tmp_path, how)
    run_id = open_run(workflow)
    check_same_run(other, run_id, tmp_path / "project" / ".mcp-run")


def reach(workflow: Path, tmp: Path, how: str) -> Path:
    """A second name of ``workflow`` in its own folder (so the default state directory is beside it)."""
    if how == "hard link":
        other = workflow.parent / "other-name.yaml"
        os.link(workflow, other)
        return other
    if how == "symlink":
        other = workflow.parent / "alias.yaml"
        other.symlink_to(workflow)
        return other
    mount = tmp / "mounted"
    mount.mkdir()
    done = subprocess.run(["mount", "--bind", str(workflow.parent), str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    return mount / workflow.name


@pytest.fixture(autouse=True)
def _unmount(tmp_path: Path) -> object:
    yield None
    if (tmp_path / "mounted").exists():  # (a bind mount of the same file system is no Path.is_mount())
        subprocess.run(["umount", str(tmp_path / "mounted")], check=False, capture_output=True)


def test_two_names_of_one_file_never_run_at_once(tmp_path: Path) -> None:
    gate, count = tmp_path / "gate", tmp_path / "count.txt"
    workflow = write(tmp_path / "project", mode="count", **{"count-file": str(count), "gate": str(gate)})
    workflow.write_text(workflow.read_text().replace("    timeout: 0.5\n", ""))
    other = workflow.parent / "other-name.yaml"
    os.link(workflow, other)
    first = subprocess.Popen(
        [sys.executable, "-m", "runner", str(workflow), "--quiet"],
        env=environment_without_state_dir(),
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        wait_until(lambda: list((workflow.parent / ".mcp-run" / "runs").glob("*/journal.jsonl")) != [])
        wait_until(
            lambda: b"item_dispatched" in next((workflow.parent / ".mcp-run" / "runs").glob("*/j*")).read_bytes()
        )
        second = mcp_run(other, cwd=tmp_path)
        assert second.returncode == 6, second.stderr  # busy: the same file runs now
        gate.touch()
        _out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert count.read_text().split() == ["a"]


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)  # polling files another process writes; bounded


def test_two_workflows_sharing_a_file_name_and_a_state_dir_are_told_apart_by_name(tmp_path: Path) -> None:
    env = {"MCP_RUN_STATE_DIR": str(tmp_path / "state")}
    a = write(tmp_path / "a")
    run_id = open_run(a, env)
    b = write(tmp_path / "b", mode="ok")
    refused = mcp_run(b, cwd=tmp_path, env=env)  # the same file name: the same workflow, so refused, and why
    assert refused.returncode == 2, refused.stderr
    assert f"started from {a}" in refused.stderr.replace("\n", " ") or str(a) in refused.stderr
    b.write_text(b.read_text().replace("version: 1\n", "version: 1\nname: b-batch\n"))
    ran = mcp_run(b, cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr
    assert run_id in runs_in(tmp_path / "state")
