"""``tests.support.sigint_default``: a child started with it takes SIGINT as Python's ``KeyboardInterrupt`` even
when the test process ignores SIGINT (as a background job of a non-interactive shell does)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

from tests.support import sigint_default

PROBE = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


def _handled(preexec_fn: Callable[[], object] | None = None) -> str:
    """Whether a child Python, started with ``preexec_fn``, handles SIGINT (raises ``KeyboardInterrupt``)."""
    probe = [sys.executable, "-c", PROBE]
    result = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=True, preexec_fn=preexec_fn)
    return result.stdout.strip()


def test_a_child_takes_sigint_though_the_test_process_ignores_it() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        plain = _handled()
        restored = _handled(preexec_fn=sigint_default)
    finally:
        signal.signal(signal.SIGINT, before)
    assert plain == "False"  # what the helper is for: an ignored SIGINT is inherited
    assert restored == "True"
