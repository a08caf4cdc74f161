"""Starts a child that sleeps forever (it inherits stdout and stderr), writes the child's pid to the file named
by argv[1] and says ``{"method": "ready", "params": {"pid": ...}}``. Then it reads stdin to its end, or with
``--exit`` exits at once, leaving the child behind holding the pipes."""

import json
import subprocess
import sys


def main() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True: time.sleep(60)"], stdin=subprocess.DEVNULL
    )
    with open(sys.argv[1], "w") as f:
        f.write(str(child.pid))
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "ready", "params": {"pid": child.pid}}) + "\n")
    sys.stdout.flush()
    if "--exit" not in sys.argv:
        sys.stdin.buffer.read()


main()
