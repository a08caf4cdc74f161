"""End to end: the demo workflow under a pseudo-terminal shows the live view (bars, counts, a log line).

The run is real (``mcp-run`` driving ``python -m runner.demo`` over stdio) with stderr on the slave side of a
pty, so ``make_view`` sees a terminal. The wait is bounded on the real clock; nothing sleeps.
"""

from __future__ import annotations

import os
import pty
import re
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ITEMS = 300
DEADLINE = 90.0
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

WORKFLOW = """\
version: 1
name: Convert many pages
servers:
  docs:
    command: [{python}, -m, runner.demo]
    max_concurrency: 2
steps:
  list_files:
    server: docs
    tool: list_markdown
    args: {{folder: docs}}
  convert:
    server: docs
    tool: convert_markdown
    for_each: ${{{{ steps.list_files.structured.files }}}}
    key: ${{{{ item }}}}
    args: {{path: "${{{{ item }}}}", out_dir: build}}
outputs:
  pages: ${{{{ length(steps.convert.items) }}}}
"""


def run_under_pty(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, bytes]:
    """Run ``argv`` with stderr on a 100x30 pty; returns (exit code, stderr as the terminal got it, stdout)."""
    import fcntl
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    assert proc.stdout is not None
    chunks: list[bytes] = []
    out: list[bytes] = []
    deadline = time.monotonic() + DEADLINE
    open_fds = {master, proc.stdout.fileno()}
    try:
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no end within {DEADLINE}s; the terminal got:\n{b''.join(chunks)[-2000:]!r}")
            ready, _, _ = select.select(list(open_fds), [], [], remaining)
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the slave side is closed (the child exited)
                    data = b""
                if not data:
                    open_fds.discard(fd)
                elif fd == master:
                    chunks.append(data)
                else:
                    out.append(data)
        code = proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        proc.stdout.close()
    return code, b"".join(chunks).decode("utf-8", "replace"), b"".join(out)


@pytest.mark.slow
def test_demo_under_a_terminal_shows_bars_counts_and_a_log_line(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(ITEMS):
        (docs / f"page{n:03d}.md").write_text(f"# Page {n}\n\nSome *text* for page {n}.\n")
    (tmp_path / "convert.yaml").write_text(WORKFLOW.format(python=sys.executable))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "GITHUB_ACTIONS", "CI")}
    env.update(TERM="xterm-256color", COLUMNS="100", LINES="30")
    argv = [sys.executable, "-m", "runner", "convert.yaml", "--log-level", "info", "--state-dir", "state"]

    code, screen, stdout = run_under_pty(argv, tmp_path, env)

    text = ANSI.sub("", screen)
    assert code == 0, text[-3000:]
    assert b'"pages": 300' in stdout
    assert "\x1b[?25l" in screen  # the live region hid the cursor (and gave it back):
    assert "\x1b[?25h" in screen
    frames = re.findall(r"convert +([━─]{24}) +(\d+)/300", text)
    assert frames, text[-3000:]  # the fan-out's line: a 24-cell bar and done/total
    assert any(0 < int(done) < ITEMS and "━" in bar for bar, done in frames), frames
    assert re.search(r"log info docs: converted page\d{3}\.md -> page\d{3}\.html", text)
    assert "✓ step convert succeeded: 300/300 succeeded" in text
    assert "calls in flight" in text
    assert "succeeded: 2 steps (2 succeeded); 301/301 calls done" in text
