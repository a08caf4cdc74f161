"""The classification table of :mod:`runner.transports.http.classify`, row by row, and the retry timings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx2
import pytest
import trio

from runner.backoff import backoff_delay
from runner.transports.http import classify as http_classify
from runner.transports.http.classify import (
    Action,
    ResumeBudget,
    classify_exception,
    classify_status,
    parse_retry_after,
)

# -- exceptions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "action"),
    [
        # not delivered: nothing was written, retry
        (httpx2.ConnectError("refused"), Action.RETRY),
        (httpx2.ConnectTimeout("slow"), Action.RETRY),
        (httpx2.PoolTimeout("pool full"), Action.RETRY),
        # never sent: our configuration is wrong
        (httpx2.UnsupportedProtocol("ftp"), Action.MISCONFIGURED),
        (httpx2.LocalProtocolError("bad header"), Action.MISCONFIGURED),
        (httpx2.InvalidURL("bad"), Action.MISCONFIGURED),
        # may have been delivered: never retried
        (httpx2.WriteError("broken pipe"), Action.IN_DOUBT),
        (httpx2.WriteTimeout("slow write"), Action.IN_DOUBT),
        (httpx2.ReadError("reset"), Action.IN_DOUBT),
        (httpx2.ReadTimeout("slow read"), Action.IN_DOUBT),
        (httpx2.RemoteProtocolError("server disconnected"), Action.IN_DOUBT),
        (httpx2.ProxyError("proxy"), Action.IN_DOUBT),
        (OSError("anything else"), Action.IN_DOUBT),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v.value,
)
def test_exception_rows(exc: BaseException, action: Action) -> None:
    assert classify_exception(exc).action is action


def test_only_the_three_not_delivered_errors_are_retried() -> None:
    """Every httpx exception class, checked: a new one in httpx must be placed in the table on purpose."""
    retried = {
        cls.__name__
        for cls in vars(httpx2).values()
        if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__.startswith("httpx")
        if _instantiable(cls) and classify_exception(_make(cls)).action is Action.RETRY
    }
    assert retried == {"ConnectError", "ConnectTimeout", "PoolTimeout"}


def _instantiable(cls: type[Exception]) -> bool:
    try:
        _make(cls)
    except TypeError:
        return False
    return True


def _make(cls: type[Exception]) -> Exception:
    if issubclass(cls, httpx2.HTTPStatusError):
        request = httpx2.Request("POST", "http://x/")
        return cls("x", request=request, response=httpx2.Response(500, request=request))
    return cls("x")


# -- statuses -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "carried_session", "action"),
    [
        (200, True, Action.OK),
        (202, False, Action.OK),
        (404, True, Action.SESSION_EXPIRED),
        (404, False, Action.REJECTED),
        (301, True, Action.REJECTED),
        (302, False, Action.REJECTED),
        (307, True, Action.REJECTED),
        (308, True, Action.REJECTED),
        (400, True, Action.REJECTED),
        (401, True, Action.REJECTED),
        (403, True, Action.REJECTED),
        (405, True, Action.REJECTED),
        (413, True, Action.REJECTED),
        (429, True, Action.RETRY_AFTER),
        (429, False, Action.RETRY_AFTER),
        (500, True, Action.IN_DOUBT),
        (502, True, Action.IN_DOUBT),
        (503, False, Action.IN_DOUBT),
        (504, True, Action.IN_DOUBT),
    ],
)
def test_status_rows(status: int, carried_session: bool, action: Action) -> None:
    assert classify_status(status, carried_session=carried_session).action is action


@pytest.mark.parametrize(
    ("status", "action"), [(503, Action.RETRY_AFTER), (429, Action.RETRY_AFTER), (500, Action.IN_DOUBT)]
)
def test_a_503_that_says_when_to_come_back_is_not_now(status: int, action: Action) -> None:
    # A bare 503 stays in doubt (a proxy may answer it after forwarding the call); with Retry-After it is a
    # server shedding load before running anything. Other 5xx stay in doubt whatever they say.
    assert classify_status(status, carried_session=True, asked_to_wait=True).action is action


@pytest.mark.parametrize(
    ("body", "carried_session", "action"),
    [
        (": Bad Request: No valid session ID provided (-32000)", True, Action.SESSION_EXPIRED),
        (": Session not found", True, Action.SESSION_EXPIRED),
        (": invalid session id", True, Action.SESSION_EXPIRED),
        (": session has expired", True, Action.SESSION_EXPIRED),
        (": the session parameter 'lang' is required", True, Action.REJECTED),  # mentions it, says nothing of it
        (": Bad Request: No valid session ID provided (-32000)", False, Action.REJECTED),
        (": Invalid params (-32602)", True, Action.REJECTED),
    ],
)
def test_a_400_naming_the_session_means_it_is_gone(body: str, carried_session: bool, action: Action) -> None:
    assert classify_status(400, carried_session=carried_session, body=body).action is action


def test_the_table_is_drawn_in_the_docstring() -> None:
    doc = http_classify.__doc__ or ""
    for needle in [
        "ConnectError, ConnectTimeout, PoolTimeout",
        "404, or 400 whose body says the session is",
        "429",
        "5xx",
    ]:
        assert needle in doc


# -- Retry-After --------------------------------------------------------------------------------------

NOW = datetime(2025, 11, 25, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("3", 3.0),
        (" 120 ", 120.0),
        ("Tue, 25 Nov 2025 12:00:30 GMT", 30.0),
        ("Tue, 25 Nov 2025 11:00:00 GMT", 0.0),  # in the past
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),  # not delay-seconds (an integer) nor a date
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == seconds


def test_parse_retry_after_uses_the_wall_clock_by_default() -> None:
    when = (datetime.now(UTC) + timedelta(seconds=100)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    seconds = parse_retry_after(when)
    assert seconds is not None and 95 <= seconds <= 100


# -- backoff ------------------------------------------------------------------------------------------


def test_backoff_doubles_up_to_the_maximum() -> None:
    delays = [backoff_delay(n, initial=0.5, maximum=3.0, jitter=0.0) for n in range(5)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_backoff_jitter_is_added_within_bounds() -> None:
    assert backoff_delay(1, initial=1.0, maximum=10.0, jitter=0.5, rng=lambda lo, hi: hi) == 2.5
    assert backoff_delay(1, initial=1.0, maximum=10.0, jitter=0.5, rng=lambda lo, hi: lo) == 2.0


# -- the resumption budget ----------------------------------------------------------------------------


def _budget(**kw: float) -> ResumeBudget:
    args: dict[str, float] = {"attempts": 4, "timeout": 100.0, "default_retry_ms": 1000, "max_delay": 30.0}
    args["jitter"] = 0.0
    args.update(kw)
    return ResumeBudget(
        attempts=int(args["attempts"]),
        timeout=args["timeout"],
        default_retry_ms=int(args["default_retry_ms"]),
        max_delay=args["max_delay"],
        jitter=args["jitter"],
        rng=lambda lo, hi: hi,
    )


async def test_budget_first_wait_is_the_server_retry_exactly() -> None:
    budget = _budget(jitter=5.0)
    assert budget.next_delay(250) == 0.25  # no jitter on the first reconnect
    assert budget.next_delay(250) == 0.5 + 5.0  # later ones: backoff plus jitter


async def test_budget_default_retry_and_attempts() -> None:
    budget = _budget()
    assert [budget.next_delay(None) for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, None]
    assert budget.attempt == 4


async def test_budget_server_retry_above_the_cap_is_respected() -> None:
    budget = _budget(max_delay=2.0)
    assert budget.next_delay(5000) == 5.0
    assert budget.next_delay(5000) == 5.0


async def test_budget_time(autojump_clock: trio.abc.Clock) -> None:
    budget = _budget(attempts=100, timeout=10.0)
    waits = []
    while (delay := budget.next_delay(None)) is not None:
        waits.append(delay)
        await trio.sleep(delay)
    assert waits == [1.0, 2.0, 4.0]  # 8 more would end at 15 > 10
    assert budget.remaining() == 3.0


async def test_budget_progress_starts_a_fresh_outage(autojump_clock: trio.abc.Clock) -> None:
    budget = _budget(attempts=2, timeout=5.0)
    assert budget.next_delay(None) == 1.0
    assert budget.next_delay(None) == 2.0
    assert budget.next_delay(None) is None
    await trio.sleep(4.5)
    budget.progress()
    assert budget.attempt == 0 and budget.remaining() == 5.0
    assert budget.next_delay(None) == 1.0
