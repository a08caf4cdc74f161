"""The retry rule: which failures may lead to another call (the loop is tested with the scheduler)."""

from __future__ import annotations

from runner.backoff import backoff_delay
from runner.engine.calls.retry import failure_kind, is_safe_to_repeat
from runner.engine.core.events import FailureKind
from runner.errors import CallTimeout, InvalidCall, JsonRpcError, NotDelivered, OutcomeUnknown
from runner.exitcodes import ExitCode


def test_failure_kinds_and_safety_rule() -> None:
    assert failure_kind(NotDelivered("x")) == FailureKind.NOT_SENT
    assert failure_kind(OutcomeUnknown("x")) == FailureKind.OUTCOME_UNKNOWN
    assert failure_kind(CallTimeout("x")) == FailureKind.TIMEOUT
    assert failure_kind(JsonRpcError(1, "x")) == FailureKind.PROTOCOL_ERROR
    assert failure_kind(InvalidCall("x")) == FailureKind.INVALID_CALL
    assert is_safe_to_repeat(idempotent_step=True, trusted=False, read_only=False, idempotent_tool=False)
    assert not is_safe_to_repeat(idempotent_step=False, trusted=False, read_only=True, idempotent_tool=True)
    assert is_safe_to_repeat(idempotent_step=False, trusted=True, read_only=True, idempotent_tool=False)
    assert not is_safe_to_repeat(idempotent_step=False, trusted=True, read_only=False, idempotent_tool=False)


def test_one_backoff_formula() -> None:
    assert [backoff_delay(n, initial=1, maximum=10, jitter=0) for n in range(6)] == [1, 2, 4, 8, 10, 10]
    draws = [backoff_delay(2, initial=1, maximum=10, jitter=0.5, rng=lambda a, b: b) for _ in range(3)]
    assert draws == [4.5, 4.5, 4.5]  # jitter is added on top, up to `jitter`


def test_every_failure_kind_has_its_facts_and_words() -> None:
    for kind in FailureKind:
        assert isinstance(kind.exit_code, ExitCode) and isinstance(kind.in_doubt, bool) and kind.words
    refused = FailureKind.INVALID_CALL  # refused before sending: definite, a failure, and a resume tries it again
    assert (refused.value, refused.words, refused.exit_code, refused.in_doubt) == (
        "invalid-call",
        "invalid call",
        ExitCode.FAILED,
        False,
    )
