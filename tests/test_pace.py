"""One pause and an adaptive pace per server (runner.engine.calls.pace): the pure controller with exact numbers,
the gate on trio's virtual clock with exact schedules, and a whole run against a virtual rate limiter."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from runner.cli.runrecord import _throttled as _throttled_record
from runner.cli.runtext import render_show
from runner.engine.calls.pace import BACKOFF, Gate, Pace
from runner.engine.calls.servers import LinkPolicy, LinkThrottled, ServerLink
from runner.engine.core.events import decode
from runner.engine.core.state import fold
from runner.engine.scheduler import throttled_line
from runner.errors import Throttled
from tests.harness import FANOUT, Harness, echo_tools, plan_of, run_plan

# -- the controller (pure) ----------------------------------------------------------------------------------


def test_a_quiet_server_is_not_paced() -> None:
    pace = Pace(8)
    assert pace.quiet and pace.rate(0.0) is None and pace.next_start(5.0) == 5.0
    pace.started(5.0)
    assert pace.next_start(5.0) == 5.0 and pace.limit == 8


def test_a_throttle_pauses_and_halves_the_limit_once_per_window() -> None:
    pace = Pace(8)
    pace.started(0.0)
    first = pace.throttled(0.1, sent_at=0.0, pause=1.0)
    assert (first.until, first.limit, first.cut) == (1.1, 4, True)
    # Calls sent before that cut and refused after it are the same signal: counted, no second cut.
    again = pace.throttled(0.2, sent_at=0.05, pause=1.0)
    assert (again.until, again.limit, again.cut) == (1.2, 4, False)
    assert pace.throttles == 2 and pace.pauses == 1 and pace.paused_s == pytest.approx(1.1)
    assert pace.next_start(0.5) == 1.2  # every call waits for the pause's later end
    # A call sent after the cut that is refused cuts again.
    third = pace.throttled(1.5, sent_at=1.3, pause=1.0)
    assert (third.limit, third.cut, pace.pauses) == (2, True, 2)
    pace.throttled(3.0, sent_at=2.6, pause=0.0)
    pace.throttled(3.1, sent_at=3.05, pause=0.0)
    assert pace.limit == 1  # never below 1


def test_the_limit_grows_by_one_per_window_of_successes_never_past_max_concurrency() -> None:
    pace = Pace(4)
    pace.started(0.0)
    pace.throttled(0.0, sent_at=0.0, pause=0.0)
    assert pace.limit == 2
    limits = []
    for i in range(12):
        pace.succeeded(1.0 + i / 100)
        limits.append(pace.limit)
    # 2 successes at limit 2, then 3 at limit 3, then stays at 4 (max_concurrency)
    assert limits == [2, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4]


def test_the_rate_after_a_throttle_slow_start_then_the_measured_rate() -> None:
    pace = Pace(8)
    pace.started(0.0)
    for i in range(5):
        pace.succeeded(0.01 * i)
    # Less than a second of sending: 5 successes are only a floor; the rate grows 4 times a second.
    cut = pace.throttled(0.05, sent_at=0.0, pause=1.0)
    assert cut.rate == 5.0 and pace.rate(2.05) == pytest.approx(20.0)
    # After a second of sending at about 20/s, the server's rate is measured: pace at BACKOFF of it, back to it
    # in RECOVER (2) seconds, then above it.
    pace.started(1.05)
    for i in range(20):
        pace.succeeded(2.1 + i * 0.05)
    cut = pace.throttled(3.1, sent_at=3.0, pause=1.0)
    assert cut.rate == pytest.approx(BACKOFF * 20)
    assert pace.rate(5.1) == pytest.approx(18.0)  # half way back (16 -> 20 over 2 s)
    assert pace.rate(6.1) == pytest.approx(20.0)
    assert pace.rate(8.1) > 20.0


def test_a_rate_cap_spaces_the_starts_from_the_first_call() -> None:
    pace = Pace(8, rate=2.0)
    assert not pace.quiet
    starts = []
    now = 0.0
    for _ in range(4):
        now = pace.next_start(now)
        pace.started(now)
        starts.append(now)
    assert starts == [0.0, 0.5, 1.0, 1.5]


# -- the gate (virtual clock) -------------------------------------------------------------------------------


async def test_one_pause_holds_every_call_to_the_server(autojump_clock: trio.abc.Clock) -> None:
    pace = Pace(8, rate=2.0)
    gate = Gate(pace)
    starts: list[tuple[str, float]] = []

    async def call(name: str, at: float) -> None:
        await trio.sleep_until(at)
        starts.append((name, await gate.enter()))
        gate.leave()

    first = await gate.enter()
    for i in range(3):
        pace.succeeded(0.01 * i)
    await trio.sleep(0.1)
    pace.throttled(trio.current_time(), sent_at=first, pause=1.0)  # its 429: Retry-After 1
    gate.leave()
    async with trio.open_nursery() as nursery:
        for name, at in (("b", 0.2), ("c", 0.3), ("d", 0.4)):
            nursery.start_soon(call, name, at)
    assert sorted(at for _, at in starts) == [1.1, 1.6, 2.1]  # none before the pause ends, then 2/s


async def test_the_gate_holds_calls_over_the_limit(autojump_clock: trio.abc.Clock) -> None:
    pace = Pace(4)
    gate = Gate(pace)
    sent = await gate.enter()
    pace.throttled(0.0, sent_at=sent - 0.1, pause=0.0)
    pace.throttled(0.0, sent_at=sent - 0.2, pause=0.0)  # sent before that cut: no second one
    gate.leave()
    assert pace.limit == 2
    pace.throttled(0.0, sent_at=sent, pause=0.0)
    assert pace.limit == 1
    times: list[float] = []

    async def hold(seconds: float) -> None:
        times.append(await gate.enter())
        await trio.sleep(seconds)
        gate.leave()

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(hold, 5.0)
    assert times == [1.0, 6.0, 11.0]  # one at a time (the first after the slow start's 1 s interval)


# -- the link: one pause, a budget --------------------------------------------------------------------------


async def test_the_link_gives_up_resending_after_its_reconnect_budget(autojump_clock: trio.abc.Clock) -> None:
    events: list[Any] = []
    link = ServerLink("api", lambda: None, LinkPolicy(reconnect=10.0), on_event=events.append)  # type: ignore[arg-type, return-value]
    refused = Throttled("429", status_code=429, retry_after=4.0)
    assert link.throttled(refused, sent_at=0.0)
    await trio.sleep(4.0)
    assert link.throttled(refused, sent_at=4.0)  # the next pause ends at 8 s: within 10 s
    await trio.sleep(4.0)
    assert not link.throttled(refused, sent_at=8.0)  # it would end at 12 s
    link.healthy()  # a call was answered: a new budget
    assert link.throttled(refused, sent_at=8.0)
    assert [(e.pause, e.limit, e.cut) for e in events] == [(4.0, 4, True), (4.0, 2, True), (4.0, 1, True)]
    assert throttled_line(events[0]) == "server api: throttled (429), pausing 4.0 s; running 4 at a time, 1.0 calls/s"


def test_rising_latency_cuts_the_limit_of_a_server_that_pushed_back() -> None:
    pace = Pace(8)
    pace.throttled(1.0, sent_at=0.5, pause=0.0)
    assert pace.limit == 4
    limits = []
    for i in range(8):  # fast calls: the unloaded latency (counted from the 8th on)
        pace.succeeded(2.0 + i * 0.1, 0.1)
        limits.append(pace.limit)
    assert limits == [4, 4, 4, 5, 5, 5, 5, 5]  # a window of 4 successes: grown by one
    for i in range(5):  # now each takes ten times as long: the server queues them
        pace.succeeded(3.0 + i, 1.0)
        limits.append(pace.limit)
    # The 9th success ends a window of 5 with the smoothed latency at 0.28 s (> 2 x 0.1): cut by a quarter;
    # the next window of 4 ends at the 13th, still slow: cut again.
    assert limits[8:] == [4, 4, 4, 4, 3] and pace.latency_cuts == 2


def test_latency_alone_never_slows_a_server_that_did_not_push_back() -> None:
    """A batch's calls take as long as their items need: on a server that never refused, slow calls say nothing
    about its load."""
    pace = Pace(8)
    for i in range(40):
        pace.succeeded(float(i), 0.1 if i < 10 else 5.0)
    assert pace.limit == 8 and pace.latency_cuts == 0


def test_a_throttle_without_retry_after_waits_the_backoff() -> None:
    event = LinkThrottled("api", 503, 2.0, False, 8, None, True)
    assert throttled_line(event) == "server api: throttled (503), pausing 2.0 s (backoff); running 8 at a time"


# -- a whole run (virtual clock) ----------------------------------------------------------------------------


class Bucket:
    """A server that admits ``rate`` calls a second, ``burst`` saved, on trio's clock; the rest refused."""

    def __init__(self, rate: float, burst: int, retry_after: float | None) -> None:
        self.rate, self.burst, self.retry_after = rate, float(burst), retry_after
        self.tokens, self.at, self.refused = float(burst), 0.0, 0

    def __call__(self) -> Throttled | None:
        now = trio.current_time()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        self.refused += 1
        return Throttled("server answered 429 Too Many Requests", status_code=429, retry_after=self.retry_after)


async def test_a_refused_call_not_safe_to_repeat_is_sent_again_after_the_pause(
    autojump_clock: trio.abc.Clock,
) -> None:
    harness = Harness({"s": echo_tools})
    refusals = iter([Throttled("429", status_code=429, retry_after=2.0)])
    harness.refuse = lambda: next(refusals, None)
    events: list[dict[str, Any]] = []
    warnings: list[str] = []
    outcome = await run_plan(plan_of(FANOUT.replace("ITEMS", '["a"]')), harness, events=events, warnings=warnings)
    assert outcome.status == "succeeded"
    assert len(harness.calls("s")) == 1 and trio.current_time() == pytest.approx(2.0)
    kinds = [(e["type"], e.get("kind")) for e in events if e["type"].startswith("item_")]
    assert kinds == [
        ("item_dispatched", None),
        ("item_failed", "connection-before-send"),  # refused, not run: sent again although not safe to repeat
        ("item_dispatched", None),
        ("item_succeeded", None),
    ]
    assert warnings == ["server s: throttled (429), pausing 2.0 s; running 4 at a time, 1.0 calls/s"]


async def test_a_server_that_keeps_refusing_is_given_up_within_its_reconnect_budget(
    autojump_clock: trio.abc.Clock,
) -> None:
    harness = Harness({"s": echo_tools})
    harness.refuse = lambda: Throttled("429", status_code=429, retry_after=30.0)
    text = FANOUT.replace("ITEMS", '["a"]').replace("{command: [fake]}", "{command: [fake], reconnect: 100s}")
    outcome = await run_plan(plan_of(text), harness)
    assert outcome.status != "succeeded" and harness.calls("s") == []
    assert trio.current_time() == pytest.approx(90.0)  # three pauses of 30 s; a fourth would end past 100 s


async def test_a_fanout_against_a_rate_limiter_runs_at_its_pace(autojump_clock: trio.abc.Clock) -> None:
    # The target scenario of issue 30 on the virtual clock: 20 calls/s, burst 5, Retry-After 1.
    harness = Harness({"s": echo_tools})
    bucket = harness.refuse = Bucket(20.0, 5, 1.0)
    items = [str(i) for i in range(300)]
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(FANOUT.replace("ITEMS", str(items).replace("'", '"'))), harness, events=events)
    assert outcome.status == "succeeded"
    texts = sorted(c.params["arguments"]["text"] for c in harness.calls("s"))
    assert texts == sorted(items)  # each run exactly once
    assert bucket.refused <= 60 and trio.current_time() < 25.0
    counts = outcome.throttled["s"]
    assert counts["refused"] == bucket.refused and counts["pauses"] >= 1 and 1 <= counts["concurrency"] <= 8
    assert outcome.report().to_json()["throttled"] == {"s": counts}
    # Journaled, one record per refusal: what `show` and `report` count afterwards, from the journal alone.
    throttles = [e for e in events if e["type"] == "server_throttled"]
    assert len(throttles) == bucket.refused and all(e["server"] == "s" and e["status"] == 429 for e in throttles)
    state = fold(decode(e) for e in events)
    session = state.sessions["s"]
    assert session.throttled == bucket.refused and session.slowed == sum(1 for e in throttles if e.get("cut"))
    assert session.slowed >= 1
    assert session.limit == throttles[[i for i, e in enumerate(throttles) if e.get("cut")][-1]]["limit"]
    text = render_show({**_SHOWN, "throttled": _throttled_record(state)})
    assert f"server s: {bucket.refused} answers of 429/503, pace lowered {session.slowed} time" in text


_SHOWN: dict[str, Any] = {
    "run_id": "r",
    "status": "succeeded",
    "workflow": "w.yaml",
    "started": None,
    "duration_s": None,
    "steps": {},
    "failures": [],
    "running": [],
    "in_doubt": [],
    "logs": [],
}


def test_the_summary_says_which_servers_throttled() -> None:
    from runner.cli.report import render_summary

    summary = {
        "status": "succeeded",
        "duration_s": 20.0,
        "steps": {
            "fan": {
                "status": "succeeded",
                "total": 3,
                "succeeded": 3,
                "failed": 0,
                "in_doubt": 0,
                "skipped": 0,
                "reused": 0,
            }
        },
        "failed": [],
        "in_doubt": [],
        "throttled": {"api": {"refused": 7, "pauses": 3, "paused_s": 3.0, "concurrency": 4}},
    }
    text = render_summary(summary)
    assert "  server api throttled: 7 answers of 429/503, paused 3 times (3.0s); ended at 4 at a time" in text


# -- rate: on a server --------------------------------------------------------------------------------------

RATED = """
version: 1
servers:
  api:
    url: http://127.0.0.1:1/mcp
    rate: RATE
steps:
  a: {server: api, tool: t}
"""


@pytest.mark.parametrize(("text", "per_second"), [("20/s", 20.0), ("300/min", 5.0), ("1800 / h", 0.5), ("4", 4.0)])
def test_a_servers_rate_is_calls_per_second(text: str, per_second: float) -> None:
    from runner.workflow.loader import parse_workflow, validate

    plan = validate(parse_workflow(RATED.replace("RATE", text)))
    assert plan.servers["api"].rate == per_second


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fast", "servers.api.rate: expected a rate such as 20/s or 300/min, not 'fast'"),
        ("0/s", "servers.api.rate: a rate must be above 0, not '0/s'"),
        ("20/day", "servers.api.rate: expected a rate such as 20/s or 300/min, not '20/day'"),
    ],
)
def test_a_rate_that_is_not_one_is_a_clear_error(text: str, message: str) -> None:
    from runner.errors import WorkflowError
    from runner.workflow.loader import parse_workflow, validate

    with pytest.raises(WorkflowError) as info:
        validate(parse_workflow(RATED.replace("RATE", text), file="w.yaml"))
    assert message in str(info.value)
