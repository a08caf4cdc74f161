"""Writes what it is told, then exits: ``--stdout RAW`` (written as is: add your own newlines),
``--stderr TEXT --count N`` (``TEXT i`` lines, i from 0), ``--wait`` (read stdin to its end first),
``--code N`` (the exit code)."""

import argparse
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdout", default="")
    parser.add_argument("--stderr", default="")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--code", type=int, default=0)
    args = parser.parse_args()
    if args.stderr:
        sys.stderr.write("".join(f"{args.stderr} {i}\n" for i in range(args.count)))
        sys.stderr.flush()
    sys.stdout.write(args.stdout)
    sys.stdout.flush()
    if args.wait:
        sys.stdin.buffer.read()
    sys.exit(args.code)


main()
