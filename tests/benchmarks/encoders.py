"""JSON encoders for journal lines: the standard library's (what the journal uses) against orjson and msgspec,
on the records a fan-out writes per item, each made into the same UTF-8 line.

    .venv/bin/python -m tests.benchmarks.encoders [--lines 20000] [--repeat 5]

Each encoder must give what :mod:`runner.jsontext` requires of a journal line: lone surrogates, DEL, the C1
and the bidirectional controls as ``\\uXXXX`` escapes. orjson and msgspec refuse a lone surrogate (and orjson
an integer past 64 bits) instead of writing it, and write DEL, C1 and bidi raw; so each is measured as the
cheapest one-path use of it that keeps that rule: encode to bytes, escape those characters in the bytes (a
scan that finds none in ASCII lines). The line with a lone surrogate is counted for the standard library
only; for the others it shows what they would need (a second path). orjson and msgspec are not project
dependencies: ``pip install orjson msgspec`` into the venv first; an encoder that is missing is skipped.

Prints µs per line (median of ``--repeat`` rounds, with the spread) and each one's ratio to the standard
library's, all measured in this one process.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable
from json.encoder import c_encode_basestring, c_make_encoder  # type: ignore[attr-defined]
from typing import Any

from runner.engine.core.events import Entry, ItemDispatched, ItemSucceeded, encode
from runner.engine.journal.writer import _dumps
from runner.jsontext import escape

_ESCAPED_UTF8 = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")  # DEL, C1, bidi as UTF-8


def _escape_utf8(match: re.Match[bytes]) -> bytes:
    return f"\\u{ord(match.group().decode()):04x}".encode()


def _escaped(data: bytes) -> bytes:
    return data if data.isascii() and b"\x7f" not in data else _ESCAPED_UTF8.sub(_escape_utf8, data)


def records(n: int) -> list[dict[str, Any]]:
    """The journal objects of ``n`` items of a fan-out: a dispatch and a success each (an echo's result), one in
    ten with non-ASCII text, one in a hundred with a C1 control."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        text = f"hello {i}" + (" — é" if i % 10 == 0 else "") + ("\x85" if i % 100 == 0 else "")
        out.append(
            encode(
                Entry(
                    2 * i + 1,
                    "2026-12-01T00:00:00.000Z",
                    ItemDispatched(
                        step="fan", item=str(i), index=i, server="echo", tool="echo", request_id=i + 2,
                        progress_token=f"p{i}", attempt=1,
                    ),
                )
            )
        )  # fmt: skip
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        out.append(
            encode(
                Entry(
                    2 * i + 2,
                    "2026-12-01T00:00:00.001Z",
                    ItemSucceeded(step="fan", item=str(i), index=i, result=result),
                )
            )
        )
    return out


def encoders() -> dict[str, Callable[[dict[str, Any]], bytes]]:
    found: dict[str, Callable[[dict[str, Any]], bytes]] = {
        "json (stdlib, the journal's)": lambda obj: (_dumps(obj) + "\n").encode(),
    }
    c_encoder = c_make_encoder(None, str, c_encode_basestring, None, ":", ",", False, False, True)
    found["json (stdlib, C encoder built once)"] = lambda obj: (escape("".join(c_encoder(obj, 0))) + "\n").encode()
    try:
        import orjson

        dumps = orjson.dumps
        opt = orjson.OPT_APPEND_NEWLINE
        found["orjson"] = lambda obj: _escaped(dumps(obj, default=str, option=opt))
    except ImportError:
        pass
    try:
        import msgspec

        encoder = msgspec.json.Encoder(enc_hook=str)
        found["msgspec"] = lambda obj: _escaped(encoder.encode(obj) + b"\n")
    except ImportError:
        pass
    return found


def measure(encode_line: Callable[[dict[str, Any]], bytes], lines: list[dict[str, Any]]) -> float:
    start = time.process_time()
    for obj in lines:
        encode_line(obj)
    return (time.process_time() - start) / len(lines) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=20_000, help="items (two lines each)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    lines = records(args.lines)
    found = encoders()
    for name, fn in found.items():  # same lines from each (escapes included), bar the number formatting
        for obj in lines[:200]:
            assert b"\xc2\x85" not in fn(obj), name
    times: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(args.repeat):
        for name, fn in found.items():  # interleaved: the machine's drift falls on each alike
            times[name].append(measure(fn, lines))
    base = statistics.median(times["json (stdlib, the journal's)"])
    print(f"{len(lines):,} journal lines (a fan-out's dispatch + success records), {args.repeat} rounds")
    print("| encoder | µs per line | spread | / stdlib |")
    print("|---|--:|--:|--:|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {min(values):.2f}-{max(values):.2f} | {median / base:.2f} |")
    surrogate = {"seq": 1, "ts": "t", "type": "log", "server": "s", "level": "info", "data": "a\ud800b"}
    for name, fn in found.items():
        try:
            fn(surrogate)
            verdict = "written as \\ud800"
        except (TypeError, UnicodeEncodeError) as exc:
            verdict = f"refused: {type(exc).__name__}: {exc}"
        print(f"lone surrogate, {name}: {verdict}")


if __name__ == "__main__":
    main()
