"""How a batch's items end when its activity failed on every attempt: from the last heartbeat's markers."""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

from runner.temporal.lost import lost_outcomes

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
