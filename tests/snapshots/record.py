"""Turn the journal of a real run into a deterministic fixture: fixed run id, pid, paths and timestamps.

    python tests/snapshots/record.py RAW_JOURNAL NAME [--root /tmp/rec] [--step-ms 40] [--finish STATUS:CODE]
    python tests/snapshots/record.py --derive

Timestamps become 2026-01-02T0H:04:05.000Z (H: the fixture's hour in ``HOURS``, so runs sort in that order)
plus ``step-ms`` per event (by ``seq``), so the plain view's timing (progress lines every few seconds)
depends on the fixture only. ``--finish`` appends a ``run_finished`` record if the recording lacks one.
``succeeded``, ``failed`` and ``fanout`` were recorded from the demo server (``python -m runner.demo``) this
way; ``--derive`` then makes ``interrupted`` (the process died with calls in flight) from ``succeeded`` and
``in_doubt`` (a timeout instead of a tool error: the server may have run the call) from ``failed``.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
HOURS = {"succeeded": 3, "failed": 4, "fanout": 5, "interrupted": 6, "in_doubt": 7}


def run_id_for(name: str) -> str:
    return f"20260102T{HOURS[name]:02d}0405.000000Z-{name[:6]}"


def ts(seq: int, step_ms: int, name: str) -> str:
    base = datetime(2026, 1, 2, HOURS[name], 4, 5, tzinfo=UTC)
    moment = base + timedelta(milliseconds=(seq - 1) * step_ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def normalize(lines: list[dict[str, Any]], name: str, root: str, step_ms: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(json.dumps(lines).replace(root, "/srv/demo"))
    for event in out:
        event["ts"] = ts(event["seq"], step_ms, name)
        if "pid" in event:
            event["pid"] = 4242
        if event["type"] == "run_started":
            event["run_id"] = run_id_for(name)
    return out


def read(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def write(name: str, events: list[dict[str, Any]]) -> None:
    body = "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in events)
    (HERE / f"{name}.jsonl").write_text(body)


def finish(events: list[dict[str, Any]], name: str, status: str, code: int, step_ms: int, outputs: Any) -> None:
    if events[-1]["type"] == "run_finished":
        return
    seq = events[-1]["seq"] + 1
    end = {"seq": seq, "ts": ts(seq, step_ms, name), "type": "run_finished", "status": status, "exit_code": code}
    events.append({**end, "outputs": outputs})


def derive() -> None:
    ok = read("succeeded")
    last_dispatch = max(i for i, e in enumerate(ok) if e["type"] == "item_dispatched" and e["step"] == "convert")
    crashed = [dict(e, ts=ts(e["seq"], 40, "interrupted")) for e in ok[: last_dispatch + 3]]
    crashed[0]["run_id"] = run_id_for("interrupted")
    write("interrupted", crashed)
    doubt = []
    for event in read("failed"):
        event = dict(event, ts=ts(event["seq"], 40, "in_doubt"))
        if event["type"] == "run_started":
            event["run_id"] = run_id_for("in_doubt")
        if event["type"] == "item_failed":
            event.update(kind="timeout", error="no response within 30s; the call was cancelled", result=None)
        if event["type"] == "run_finished":
            event.update(status="in-doubt", exit_code=5)
        if event["type"] == "step_finished" and event["step"] == "convert":
            event["counts"] = {**event["counts"], "failed": 0, "in_doubt": 1}
        doubt.append(event)
    write("in_doubt", doubt)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("raw", nargs="?")
    parser.add_argument("name", nargs="?", choices=sorted(HOURS))
    parser.add_argument("--root", default="/tmp/rec")
    parser.add_argument("--step-ms", type=int, default=40)
    parser.add_argument("--finish", metavar="STATUS:CODE")
    parser.add_argument("--outputs", default="{}")
    parser.add_argument("--derive", action="store_true")
    args = parser.parse_args()
    if args.derive:
        derive()
        return
    raw = [json.loads(line) for line in Path(args.raw).read_text().splitlines() if line.strip()]
    events = normalize(raw, args.name, args.root, args.step_ms)
    if args.finish:
        status, code = args.finish.split(":")
        finish(events, args.name, status, int(code), args.step_ms, json.loads(args.outputs))
    write(args.name, events)


if __name__ == "__main__":
    main()
