"""Showing a run as it goes, from the same events the journal gets.

:class:`PlainView` writes timestamped lines for CI logs, cron mail and pipes: step started and finished,
a fan-out progress line at most every ``interval`` seconds, failures, and server log messages at or above
the chosen level. When ``GITHUB_ACTIONS=true``, failures are also written as ``::error`` workflow commands.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime
from typing import Any, Protocol, TextIO

import trio

from runner.plan import Plan
from runner.protocol import LOG_LEVELS

__all__ = ["PlainView", "View", "make_view"]


class View(Protocol):
    def observe(self, event: dict[str, Any]) -> None: ...

    async def run(self) -> None: ...

    def close(self) -> None: ...


class NullView:
    def observe(self, event: dict[str, Any]) -> None:
        return None

    async def run(self) -> None:
        return None

    def close(self) -> None:
        return None


def _level_index(level: Any) -> int:
    try:
        return LOG_LEVELS.index(str(level))
    except ValueError:
        return 1


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class PlainView:
    """Line-oriented progress for logs. ``clock`` is injectable so tests get fixed timestamps."""

    def __init__(
        self,
        stream: TextIO,
        *,
        log_level: str = "warning",
        interval: float = 5.0,
        quiet: bool = False,
        github: bool = False,
        clock: Any = None,
    ) -> None:
        self._stream = stream
        self._threshold = _level_index(log_level)
        self._interval = interval
        self._quiet = quiet
        self._github = github
        self._clock = clock or time.monotonic
        self._fanouts: dict[str, dict[str, Any]] = {}
        self._last_line: dict[str, float] = {}
        self._closed = trio.Event()

    def _ts(self, event: dict[str, Any]) -> str:
        ts = str(event.get("ts", ""))
        try:
            return datetime.fromisoformat(ts.replace("Z", "+00:00")).strftime("%H:%M:%S")
        except ValueError:
            return ts

    def _write(self, event: dict[str, Any], text: str) -> None:
        self._stream.write(f"{self._ts(event)} {text}\n")
        self._stream.flush()

    def observe(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        step = event.get("step")
        if kind == "item_failed":
            if event.get("retrying"):
                return
            where = f"{step}" + (f"[{str(event.get('item'))[:16]}]" if event.get("item") else "")
            error = _short(event.get("error"))
            self._write(event, f"error {where}: {event.get('kind')}: {error}")
            if self._github:
                self._stream.write(f"::error title=mcp-run step {step}::{event.get('kind')}: {error}\n")
            self._count(event, "failed")
            return
        if kind == "log":
            if _level_index(event.get("level")) >= self._threshold:
                where = f" {step}" + (f"[{str(event.get('item'))[:16]}]" if event.get("item") else "") if step else ""
                logger = f" {event['logger']}" if event.get("logger") else ""
                self._write(
                    event, f"log {event.get('level')} {event.get('server')}{logger}{where}: {_short(event.get('data'))}"
                )
            return
        if kind == "session_failed":
            self._write(event, f"error server {event.get('server')}: {_short(event.get('error'))}")
            return
        if self._quiet:
            if kind == "item_succeeded":
                self._count(event, "succeeded")
            return
        if kind == "step_started":
            total = event.get("items")
            if total is not None:
                self._fanouts[str(step)] = {"total": total, "succeeded": 0, "failed": 0, "start": self._clock()}
                self._last_line[str(step)] = self._clock()
                self._write(event, f"step {step} started: {total} items")
            else:
                self._write(event, f"step {step} started")
        elif kind == "step_finished":
            counts = event.get("counts") or {}
            detail = ""
            if str(step) in self._fanouts:
                detail = f": {counts.get('succeeded', 0)}/{counts.get('total', 0)} succeeded"
                if counts.get("failed"):
                    detail += f", {counts['failed']} failed"
                if counts.get("in_doubt"):
                    detail += f", {counts['in_doubt']} in doubt"
            self._write(event, f"step {step} {event.get('status')}{detail}")
        elif kind == "step_skipped":
            self._write(event, f"step {step} skipped: {event.get('reason')}")
        elif kind == "session_opened":
            info = event.get("server_info") or {}
            name = f"{info.get('name', '?')} {info.get('version', '')}".strip()
            self._write(
                event, f"server {event.get('server')} connected ({name}, protocol {event.get('protocol_version')})"
            )
        elif kind == "item_succeeded":
            self._count(event, "succeeded")

    def _count(self, event: dict[str, Any], what: str) -> None:
        step = str(event.get("step"))
        fan = self._fanouts.get(step)
        if fan is None:
            return
        fan[what] += 1
        now = self._clock()
        if now - self._last_line.get(step, 0) >= self._interval and not self._quiet:
            self._last_line[step] = now
            done = fan["succeeded"] + fan["failed"]
            elapsed = max(now - fan["start"], 1e-9)
            rate = done / elapsed
            eta = (fan["total"] - done) / rate if rate > 0 else float("inf")
            eta_text = f", eta {eta:.0f}s" if eta != float("inf") else ""
            self._write(
                event,
                f"step {step}: {done}/{fan['total']} items ({fan['failed']} failed), {rate:.1f}/s{eta_text}",
            )

    async def run(self) -> None:
        await self._closed.wait()

    def close(self) -> None:
        self._closed.set()


def make_view(args: argparse.Namespace, plan: Plan, stream: TextIO, masker: Any) -> View:
    if getattr(args, "json", False) and getattr(args, "quiet", False):
        return NullView()
    return PlainView(
        stream,
        log_level=getattr(args, "log_level", "warning"),
        quiet=bool(getattr(args, "quiet", False)),
        github=os.environ.get("GITHUB_ACTIONS") == "true",
    )
