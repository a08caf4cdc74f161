"""How a batch's items end when its activity failed on every attempt: from the last heartbeat's markers."""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

from runner.temporal.lost import lost_outcomes, own_outcomes

BATCH = [{"key": f"k{i}", "index": i} for i in range(4)]


def _lost(cause: BaseException) -> ActivityError:
    exc = ActivityError(
        "activity error", scheduled_event_id=1, started_event_id=2, identity="w", activity_type="t",
        activity_id="1", retry_state=None,
    )  # fmt: skip
    exc.__cause__ = cause
    return exc


def _timeout(*details: Any) -> ActivityError:
    return _lost(TimeoutError("activity Heartbeat timeout", type=TimeoutType.HEARTBEAT, last_heartbeat_details=details))


def test_a_heartbeat_timeout_keeps_the_recorded_ends_and_puts_only_the_dispatched_in_doubt() -> None:
    done = {"key": "k0", "index": 0, "status": "succeeded", "result": {"content": []}}
    retry = {"key": "k1", "index": 1, "status": "retry", "kind": "connection-before-send",
             "error": "connection refused"}  # fmt: skip
    outcomes = lost_outcomes(_timeout({"dispatched": ["k2"], "ended": {"k0": done, "k1": retry}}), BATCH)
    assert outcomes[0] == done
    assert outcomes[1] == {**retry, "status": "failed"}
    assert outcomes[2]["status"] == "in_doubt" and outcomes[2]["kind"] == "outcome-unknown"
    assert "may have been sent" in outcomes[2]["error"]
    assert outcomes[3]["status"] == "failed" and outcomes[3]["kind"] == "connection-before-send"
    assert "was not sent" in outcomes[3]["error"] and "Heartbeat timeout" in outcomes[3]["error"]
    assert [o["key"] for o in outcomes] == ["k0", "k1", "k2", "k3"]


def test_without_heartbeat_details_every_item_is_in_doubt() -> None:
    for exc in (_timeout(), _timeout("garbage"), _lost(ApplicationError("boom"))):
        outcomes = lost_outcomes(exc, BATCH)
        assert [o["status"] for o in outcomes] == ["in_doubt"] * 4
        assert [(o["key"], o["index"]) for o in outcomes] == [(c["key"], c["index"]) for c in BATCH]


def _markers_after(dispatched: list[str], ended: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The details an attempt's markers hold (as :meth:`Markers.details` gives them)."""
    import trio

    from runner.temporal.markers import Markers

    async def commit(details: dict[str, Any]) -> None:
        pass

    async def run() -> dict[str, Any]:
        markers = Markers(commit)
        for key in dispatched:
            await markers.dispatched(key)
        for key, end in ended.items():
            markers.ended(key, end)
        return markers.details()

    return trio.run(run)


def test_a_last_attempt_lost_to_an_exception_settles_its_items_from_its_own_markers() -> None:
    done = {"key": "k0", "index": 0, "status": "succeeded", "result": {"content": [{"type": "text", "text": "a"}]}}
    retry = {"key": "k3", "index": 3, "status": "retry", "kind": "connection-before-send", "error": "refused"}
    details = _markers_after(["k0", "k1"], {"k0": done, "k3": retry})
    outcomes = own_outcomes(BATCH, details, RuntimeError("boom\nsecond line"))
    assert outcomes[0] == done  # ended: its end and result, not called again, not in doubt
    assert outcomes[1]["status"] == "in_doubt" and outcomes[1]["kind"] == "outcome-unknown"  # begun, not ended
    assert "may have been sent" in outcomes[1]["error"] and "RuntimeError: boom" in outcomes[1]["error"]
    assert outcomes[2]["status"] == "failed" and outcomes[2]["kind"] == "connection-before-send"  # never sent
    assert "was not sent" in outcomes[2]["error"] and "second line" not in outcomes[2]["error"]
    assert outcomes[3] == {**retry, "status": "failed"}  # a retry can no longer be: failed as not sent
    assert [(o["key"], o["index"]) for o in outcomes] == [(c["key"], c["index"]) for c in BATCH]
    assert all(o["status"] != "retry" for o in outcomes)


def test_a_lost_last_attempt_never_loses_an_in_doubt_item_of_an_earlier_attempt() -> None:
    """Restored from an earlier attempt's heartbeat: k2 was dispatched there; the exception came before this
    attempt looked at it. It stays in doubt (never failed as not sent, which a resume would send again)."""
    import trio

    from runner.temporal.markers import Markers

    async def commit(details: dict[str, Any]) -> None:
        pass

    async def run() -> dict[str, Any]:
        return Markers(commit, {"dispatched": ["k2"], "ended": {}}).details()

    outcomes = own_outcomes(BATCH, trio.run(run), ExceptionGroup("many", [ValueError("first")]))
    assert [o["status"] for o in outcomes] == ["failed", "failed", "in_doubt", "failed"]
    assert "ValueError: first" in outcomes[2]["error"]


def test_malformed_markers_put_every_item_in_doubt() -> None:
    for details in (None, "x", {"dispatched": "k1", "ended": {}}):
        outcomes = own_outcomes(BATCH, details, RuntimeError())
        assert [o["status"] for o in outcomes] == ["in_doubt"] * 4
        assert "RuntimeError" in outcomes[0]["error"]
