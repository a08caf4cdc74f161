"""What is refused before the first call, end to end: a state directory that cannot keep runs, an ``--output``
that cannot take the outputs, an ``--inputs-file`` that is no regular file; and what is still reported
cleanly at the end: ``--output`` failing after all, an output that fails to render.

Every refusal is a message on stderr and exit 2, and under ``--json`` the error object on stdout as well;
the fake server's count file (the ground truth of what ran) shows that no tool was called.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import MODES, environment, run_cli, wait_for_dispatches

pytestmark = pytest.mark.integration


def write_workflow(tmp: Path, *, gate: bool = False, outputs: str = "got: ${{ steps.a.text }}") -> Path:
    """``<tmp>/wf.yaml``: one call of the fake server's ``count`` tool (``--gate``: held until ``<tmp>/gate``
    exists), counted in ``<tmp>/count.txt``."""
    server = [sys.executable, str(MODES), "count", "--count-file", str(tmp / "count.txt")]
    if gate:
        server += ["--gate", str(tmp / "gate")]
    workflow = tmp / "wf.yaml"
    workflow.write_text(
        f"""version: 1
servers:
  s: {{command: {json.dumps(server)}}}
steps:
  a: {{server: s, tool: count, args: {{key: k1}}}}
  b: {{server: s, tool: count, args: {{key: k2}}, continue_on_error: true}}
outputs:
  {outputs}
"""
    )
    return workflow


def calls(tmp: Path) -> list[str]:
    path = tmp / "count.txt"
    return path.read_text().split() if path.exists() else []


def refused(tmp: Path, *args: str, message: str) -> None:
    """``mcp-run wf.yaml ARGS`` is refused with ``message`` and exit 2, with and without ``--json``, and
    nothing is called."""
    text = run_cli(tmp, "wf.yaml", *args, timeout=60)
    assert (text.returncode, text.stderr, text.stdout) == (2, f"mcp-run: error: {message}\n", "")
    machine = run_cli(tmp, "wf.yaml", *args, "--json", timeout=60)
    assert (machine.returncode, machine.stderr) == (2, f"mcp-run: error: {message}\n")
    assert json.loads(machine.stdout) == {
        "version": 1,
        "status": "error",
        "exit_code": 2,
        "message": message,
        "problems": [],
    }
    assert calls(tmp) == []


@contextlib.contextmanager
def tmpfs(mountpoint: Path, *options: str) -> Iterator[Path]:
    """A small tmpfs mounted at ``mountpoint`` (root only: the test is skipped elsewhere)."""
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(mountpoint)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def is_root() -> bool:
    return os.geteuid() == 0


# -- the state directory ------------------------------------------------------------------------------------


ADVICE = "nothing was called. Choose another directory with --state-dir DIR"


def test_a_state_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    (tmp_path / "afile").write_text("not a folder\n")
    refused(
        tmp_path,
        "--state-dir",
        "afile",
        message=f"cannot keep runs in afile: it is a regular file, not a directory; {ADVICE}",
    )


def test_a_state_dir_that_is_dev_null_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    refused(
        tmp_path,
        "--state-dir",
        "/dev/null",
        message=f"cannot keep runs in /dev/null: it is a character device, not a directory; {ADVICE}",
    )


def test_a_state_dir_from_the_environment_says_so(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    env = {**environment(), "MCP_RUN_STATE_DIR": "/dev/null"}
    result = subprocess.run(
        [sys.executable, "-m", "runner", "wf.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr == (
        "mcp-run: error: cannot keep runs in /dev/null (it is $MCP_RUN_STATE_DIR): it is a character device, not a "
        f"directory; {ADVICE}\n"
    )
    assert calls(tmp_path) == []


def test_a_read_only_state_dir_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    with contextlib.ExitStack() as stack:
        if is_root():  # root writes whatever the mode says: a read-only file system it cannot
            stack.enter_context(tmpfs(tmp_path / "ro", "ro", "size=64k"))
            reason = "ro/runs: Read-only file system"
        else:
            (tmp_path / "ro").mkdir(mode=0o555)
            stack.callback((tmp_path / "ro").chmod, 0o755)
            reason = "ro/runs: Permission denied"
        refused(tmp_path, "--state-dir", "ro", message=f"cannot keep runs in ro: {reason}; {ADVICE}")


@pytest.mark.skipif(not is_root(), reason="mounts a tmpfs")
def test_a_state_dir_on_a_full_disk_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    with tmpfs(tmp_path / "full", "size=16k") as full:
        (full / "fill").write_bytes(b"\0" * 12 * 1024)  # what is left cannot take a run's first records
        refused(
            tmp_path,
            "--state-dir",
            "full",
            message="cannot keep runs in full: No space left on device; nothing was called. Free some space, or "
            "choose another directory with --state-dir DIR",
        )


# -- --output -----------------------------------------------------------------------------------------------


def test_an_output_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    (tmp_path / "outdir").mkdir()
    refused(
        tmp_path,
        "--state-dir", "state", "--output", "outdir",
        message="--output outdir: it is a directory; expected a file to write the outputs to; nothing was called. "
        "Name a file, for instance --output outdir/outputs.json",
    )  # fmt: skip


def test_an_output_that_refuses_writes_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    refused(
        tmp_path,
        "--state-dir", "state", "--output", "/dev/full",
        message="--output /dev/full: it refuses writes: No space left on device; nothing was called. "
        "Choose another file",
    )  # fmt: skip


@pytest.mark.parametrize("name", ["wf.yaml", "./wf.yaml", "hard-link.yaml", "symlink.yaml", "sub/../wf.yaml"])
def test_an_output_that_is_the_workflow_under_any_name_is_refused(tmp_path: Path, name: str) -> None:
    workflow = write_workflow(tmp_path)
    text = workflow.read_text()
    os.link(workflow, tmp_path / "hard-link.yaml")
    (tmp_path / "symlink.yaml").symlink_to("wf.yaml")
    (tmp_path / "sub").mkdir()
    same = name in ("wf.yaml", "./wf.yaml", "sub/../wf.yaml")
    also = "" if same else " (wf.yaml) under another name"
    refused(
        tmp_path,
        "--state-dir", "state", "--output", name,
        message=f"--output {Path(name)}: it is the workflow file{also}: writing the outputs there would overwrite it; "
        "nothing was called. Choose another file",
    )  # fmt: skip
    assert workflow.read_text() == text


def test_an_output_that_is_the_inputs_file_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    (tmp_path / "inputs.yaml").write_text("{}\n")
    refused(
        tmp_path,
        "--state-dir", "state", "--inputs-file", "inputs.yaml", "--output", "inputs.yaml",
        message="--output inputs.yaml: it is the inputs file: writing the outputs there would overwrite it; "
        "nothing was called. Choose another file",
    )  # fmt: skip


def test_an_output_in_no_folder_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    refused(
        tmp_path,
        "--state-dir", "state", "--output", "nowhere/out.json",
        message=f"--output nowhere/out.json: there is no folder {tmp_path / 'nowhere'}; nothing was called. "
        "Choose another file",
    )  # fmt: skip


@pytest.mark.parametrize("flags", [[], ["--json"]], ids=["text", "json"])
def test_an_output_that_fails_at_the_end_keeps_the_outputs(tmp_path: Path, flags: list[str]) -> None:
    """What no check at the start can know (the file became ``/dev/full`` while the calls ran): the error is
    clean, and the outputs are on stdout (the summary's, under ``--json``) and in the journal."""
    write_workflow(tmp_path, gate=True)
    out = tmp_path / "out.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "wf.yaml", "--state-dir", "state", "-q", "--output", "out.json", *flags],
        cwd=tmp_path,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_dispatches(tmp_path, 1)  # held at the gate: the check at the start is behind us
        out.symlink_to("/dev/full")
        (tmp_path / "gate").touch()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 1, stderr
    error, _, hint = stderr.rstrip("\n").rpartition(", and kept in the run's journal: ")
    printed = "in the summary's outputs on stdout" if flags else "printed on stdout"
    assert error == (
        "mcp-run: error: cannot write the outputs to --output out.json: No space left on device; the outputs "
        f"are {printed}"
    )
    assert hint.startswith("mcp-run show wf.yaml ") and hint.endswith(" --state-dir state --json")
    if flags:
        summary = json.loads(stdout)
        assert (summary["status"], summary["exit_code"]) == ("succeeded", 1)
        assert summary["outputs"] == {"got": "k1"}
        assert summary["output_file_error"] == "cannot write the outputs to --output out.json: No space left on device"
    else:
        assert json.loads(stdout) == {"got": "k1"}
    shown = run_cli(tmp_path, *hint.split()[1:], timeout=60)
    assert json.loads(shown.stdout)["outputs"] == {"got": "k1"}
    assert sorted(calls(tmp_path)) == ["k1", "k2"]


# -- --inputs-file ------------------------------------------------------------------------------------------


def test_an_inputs_file_that_is_a_fifo_is_refused_before_anything_is_held(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    os.mkfifo(tmp_path / "inputs.fifo")  # nobody writes it: reading it would wait for ever
    started = time.monotonic()
    for json_flag in ([], ["--json"]):
        result = run_cli(
            tmp_path, "wf.yaml", "--state-dir", "state", "--inputs-file", "inputs.fifo", *json_flag, timeout=60
        )
        assert result.returncode == 2
        assert result.stderr == (
            "mcp-run: error: inputs.fifo: the inputs file is a FIFO; expected a regular file\n"
            "  hint: write the inputs to a file, or give each with --input NAME=VALUE\n"
        )
        if json_flag:
            assert json.loads(result.stdout)["problems"] == [
                {
                    "message": "the inputs file is a FIFO; expected a regular file",
                    "file": "inputs.fifo",
                    "line": None,
                    "column": None,
                    "path": None,
                    "suggestion": "write the inputs to a file, or give each with --input NAME=VALUE",
                }
            ]
    assert time.monotonic() - started < 50
    assert not (tmp_path / "state").exists()  # read before the state directory, let alone its locks
    assert calls(tmp_path) == []


@pytest.mark.parametrize("command", [["validate"], ["run", "--state-dir", "state"]], ids=["validate", "run"])
def test_a_workflow_that_is_a_fifo_is_refused(tmp_path: Path, command: list[str]) -> None:
    os.mkfifo(tmp_path / "wf.yaml")
    result = run_cli(tmp_path, command[0], "wf.yaml", *command[1:], timeout=60)
    assert (result.returncode, result.stderr) == (
        2,
        "mcp-run: error: wf.yaml: the workflow is a FIFO; expected a regular file\n"
        "  hint: save the workflow as a file and give its name\n",
    )
    assert not (tmp_path / "state").exists()


def test_an_inputs_file_that_is_a_device_is_refused(tmp_path: Path) -> None:
    write_workflow(tmp_path)
    result = run_cli(tmp_path, "validate", "wf.yaml", "--inputs-file", "/dev/zero", timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("mcp-run: error: /dev/zero: the inputs file is a character device; expected a")
    (tmp_path / "folder").mkdir()
    result = run_cli(tmp_path, "wf.yaml", "--state-dir", "state", "--inputs-file", "folder", timeout=60)
    assert (result.returncode, result.stderr) == (
        2,
        "mcp-run: error: folder: the inputs file is a directory; expected a regular file\n",
    )
    assert calls(tmp_path) == []


# -- outputs that fail to render -----------------------------------------------------------------------------


def test_an_output_that_fails_to_render_is_named_and_the_others_are_written(tmp_path: Path) -> None:
    write_workflow(
        tmp_path,
        outputs="good: ${{ steps.a.text }}\n  bad: ${{ from_json(steps.a.text).x }}\n  also: 'n=${{ steps.b.text }}'",
    )
    error = (
        "wf.yaml:9:8: outputs.bad: ${{ from_json(steps.a.text).x }}: from_json() was given text that is not JSON "
        "(expecting value at line 1, column 1): 'k1'; usage: from_json(s: string) -> any"
    )
    text = run_cli(tmp_path, "wf.yaml", "--state-dir", "state", "--no-progress", "--output", "out.json", timeout=60)
    assert text.returncode == 1, text.stderr
    assert json.loads((tmp_path / "out.json").read_text()) == {"good": "k1", "also": "n=k2"}
    assert json.loads(text.stdout) == {"good": "k1", "also": "n=k2"}
    summary_line = next(line for line in text.stderr.splitlines() if line.startswith("failed: "))
    assert summary_line.startswith("failed: 2 steps (2 succeeded); 2/2 calls done in ")
    assert summary_line.endswith("s; 1 output failed to render")
    assert f"\n  output bad failed to render: {error}\n" in text.stderr
    assert "warning" not in text.stderr

    machine = run_cli(tmp_path, "wf.yaml", "--state-dir", "state", "--new-run", "--json", timeout=60)
    assert machine.returncode == 1
    summary = json.loads(machine.stdout)
    assert (summary["status"], summary["exit_code"], summary["failed"]) == ("failed", 1, [])
    assert summary["outputs"] == {"good": "k1", "also": "n=k2"}
    assert summary["outputs_failed"] == [{"output": "bad", "error": error, "file": "wf.yaml", "line": 9, "column": 8}]
    assert f"mcp-run: error: output bad failed to render: {error}\n" in machine.stderr
