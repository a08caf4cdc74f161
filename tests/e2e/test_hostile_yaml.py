"""Hostile YAML through the command line: every command that reads YAML refuses a bomb with exit 2 and a located
message, inside a process whose address space is capped (a bomb that got expanded would die of MemoryError,
with a traceback, instead of being refused) and whose CPU time is capped (one that hung would be killed)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import environment

ADDRESS_SPACE = 512 * 2**20  # Python, the runner and its libraries fit in a fraction of this
CPU_SECONDS = 30

BOMB = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
)
REFUSED = (
    "the alias *a5 repeats 597,871 values, taking the document past the limit of 2,000,000 values (aliases expanded)"
)


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def capped_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        env={**environment(), "MCP_RUN_STATE_DIR": str(cwd / "state")},
        capture_output=True,
        text=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        preexec_fn=_capped,
        timeout=120,
    )


def _indented(text: str, indent: str) -> str:
    return "".join(f"{indent}{line}\n" for line in text.splitlines())


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "in_default.yaml").write_text(
        "version: 1\nservers:\n  fs: {command: [server-fs]}\ninputs:\n  big:\n    type: object\n    default:\n"
        + _indented(BOMB, "      ")
        + "steps:\n  read: {server: fs, tool: read}\n",
        encoding="utf-8",
    )
    (tmp_path / "in_args.yaml").write_text(
        "version: 1\nservers:\n  fs: {command: [server-fs]}\nsteps:\n  read:\n    server: fs\n    tool: read\n"
        "    args:\n" + _indented(BOMB, "      "),
        encoding="utf-8",
    )
    (tmp_path / "plain.yaml").write_text(
        "version: 1\nservers:\n  fs: {command: [server-fs]}\ninputs:\n  big: {type: object, default: {}}\n"
        "steps:\n  read: {server: fs, tool: read}\n",
        encoding="utf-8",
    )
    (tmp_path / "inputs.yaml").write_text("big:\n" + _indented(BOMB, "  "), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["validate", "in_default.yaml"], "in_default.yaml:14:26: inputs.big.default.a6[2]"),
        (["plan", "in_default.yaml"], "in_default.yaml:14:26: inputs.big.default.a6[2]"),
        (["in_default.yaml"], "in_default.yaml:14:26: inputs.big.default.a6[2]"),  # the run: the bomb's 4.9 GB
        (["validate", "in_args.yaml"], "in_args.yaml:15:26: steps.read.args.a6[2]"),  # validate used to hang
        (["run", "in_args.yaml", "--json"], "in_args.yaml:15:26: steps.read.args.a6[2]"),
        (["plain.yaml", "--inputs-file", "inputs.yaml"], "inputs.yaml:8:22: big.a6[2]"),
    ],
)
def test_a_bomb_is_refused_by_every_command(files: Path, args: list[str], where: str) -> None:
    result = capped_cli(files, *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"mcp-run: error: {where}: {REFUSED}\n")
    assert "Traceback" not in result.stderr + result.stdout
    assert not list((files / "state").glob("runs/*")), "a run was started"


def test_a_file_over_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as stream:
        stream.write(b"version: 1\n")
        stream.truncate(64 * 2**20)  # 64 MiB, the rest NUL bytes (sparse on disk)
    result = capped_cli(tmp_path, "validate", "big.yaml")
    assert result.returncode == 2
    assert result.stderr == (
        "mcp-run: error: big.yaml:2:9999990: the workflow is larger than the limit of 10,000,000 bytes\n"
    )
