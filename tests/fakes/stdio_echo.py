"""A well-behaved stdio server: answers every request until stdin ends.

Method ``env`` answers ``{"env": <its environment>, "cwd": <its working directory>}``; any other method answers
``{"params": <the request's params>}``. Notifications are ignored.

With ``--hold`` it first says ``{"method": "ready"}`` and reads nothing until it gets SIGUSR1, so a test can
fill the stdin pipe.
"""

import json
import os
import signal
import sys


def main() -> None:
    out = sys.stdout.buffer
    if "--hold" in sys.argv:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        out.write(b'{"jsonrpc":"2.0","method":"ready"}\n')
        out.flush()
        signal.sigwait({signal.SIGUSR1})
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message:
            continue
        if message["method"] == "env":
            result = {"env": dict(os.environ), "cwd": os.getcwd()}
        else:
            result = {"params": message.get("params")}
        out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n")
        out.flush()


main()
