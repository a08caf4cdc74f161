"""Ignores SIGTERM (and the end of stdin), says ``{"method": "ready"}`` once it does, and never exits.
With ``--silent`` it keeps the default SIGTERM handling: a server that never reads nor answers."""

import signal
import sys
import time


def main() -> None:
    if "--silent" not in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdout.write('{"jsonrpc":"2.0","method":"ready"}\n')
    sys.stdout.flush()
    while True:
        time.sleep(60)


main()
