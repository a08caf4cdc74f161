"""Closes its stdin (so our next write fails with EPIPE while it still runs), says ``{"method": "ready"}``,
then waits for SIGUSR1 before it writes ``--lines N`` lines to stderr and exits with code 1: a test can hold
it between the failed write and its death."""

import os
import signal
import sys


def main() -> None:
    lines = int(sys.argv[sys.argv.index("--lines") + 1]) if "--lines" in sys.argv else 3
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    os.close(0)
    sys.stdout.write('{"jsonrpc":"2.0","method":"ready"}\n')
    sys.stdout.flush()
    signal.sigwait({signal.SIGUSR1})
    sys.stderr.write("".join(f"dying {i}\n" for i in range(lines)))
    sys.stderr.flush()
    sys.exit(1)


main()
