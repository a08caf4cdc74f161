"""Turn the journal of a real run into a deterministic fixture: fixed run id, pid, paths and timestamps.

    python tests/snapshots/record.py RAW_JOURNAL NAME [--root /tmp/rec] [--step-ms 40] [--finish STATUS:CODE]

Timestamps become 2026-01-02T03:04:05.000Z plus ``step-ms`` per event (by ``seq``), so the plain view's
timing (progress lines every few seconds) depends on the fixture only. ``--finish`` appends the
``run_finished`` record a finished run ends with. The fixtures of this folder were recorded from the demo
server (``python -m runner.demo``) this way; ``interrupted`` and ``in_doubt`` were then derived by
``derive()`` below (a crash after the dispatches; a timeout instead of a tool error).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
BASE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def ts(seq: int, step_ms: int) -> str:
    return (
        (BASE + timedelta(milliseconds=(seq - 1) * step_ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def normalize(lines: list[dict[str, Any]], name: str, root: str, step_ms: int) -> list[dict[str, Any]]:
    run_id = f"20260102T030405.000000Z-{name[:6]:0<6}"
    text = json.dumps(lines).replace(root, "/srv/demo")
    out = json.loads(text)
    for event in out:
        event["ts"] = ts(event["seq"], step_ms)
        if "pid" in event:
            event["pid"] = 4242
        if event["type"] == "run_started":
            event["run_id"] = run_id
    return out


def write(name: str, events: list[dict[str, Any]]) -> None:
    body = "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in events)
    (HERE / f"{name}.jsonl").write_text(body)


def finish(events: list[dict[str, Any]], status: str, code: int, step_ms: int, outputs: Any = None) -> None:
    seq = events[-1]["seq"] + 1
    events.append(
        {
            "seq": seq,
            "ts": ts(seq, step_ms),
            "type": "run_finished",
            "status": status,
            "exit_code": code,
            "outputs": outputs or {},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("name")
    parser.add_argument("--root", default="/tmp/rec")
    parser.add_argument("--step-ms", type=int, default=40)
    parser.add_argument("--finish", metavar="STATUS:CODE")
    parser.add_argument("--outputs", default="{}")
    args = parser.parse_args()
    raw = [json.loads(line) for line in Path(args.raw).read_text().splitlines() if line.strip()]
    events = normalize(raw, args.name, args.root, args.step_ms)
    if args.finish:
        status, code = args.finish.split(":")
        finish(events, status, int(code), args.step_ms, json.loads(args.outputs))
    write(args.name, events)


def derive() -> None:
    """``interrupted`` from ``succeeded`` (the process died with calls in flight); ``in_doubt`` from ``failed``
    (the missing file's call timed out instead: the server may have run it)."""
    ok = [json.loads(line) for line in (HERE / "succeeded.jsonl").read_text().splitlines()]
    last_dispatch = max(i for i, e in enumerate(ok) if e["type"] == "item_dispatched" and e["step"] == "convert")
    crashed = [dict(e) for e in ok[: last_dispatch + 3]]
    crashed[0]["run_id"] = "20260102T030405.000000Z-interr"
    write("interrupted", crashed)
    failed = [json.loads(line) for line in (HERE / "failed.jsonl").read_text().splitlines()]
    doubt = []
    for event in failed:
        event = dict(event)
        if event["type"] == "run_started":
            event["run_id"] = "20260102T030405.000000Z-in_dou"
        if event["type"] == "item_failed":
            event.update(kind="timeout", error="no response within 30s; the call was cancelled", result=None)
        if event["type"] == "run_finished":
            event.update(status="in-doubt", exit_code=5)
        if event["type"] == "step_finished" and event["step"] == "convert":
            event["counts"] = {**event["counts"], "failed": 0, "in_doubt": 1}
        doubt.append(event)
    write("in_doubt", doubt)


if __name__ == "__main__":
    main()
