"""The retry rule: which failures may lead to another call (the loop is tested with the scheduler)."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from runner.backoff import backoff_delay
from runner.engine.calls.retry import (
    Verdict,
    classify,
    failure_kind,
    is_safe_to_repeat,
    reads_annotations,
    wants_safety,
)
from runner.engine.core.vocabulary import FailureKind
from runner.errors import (
    CallTimeout,
    ConnectFailed,
    InvalidCall,
    JsonRpcError,
    NotDelivered,
    OutcomeUnknown,
    ProtocolError,
    SessionExpired,
)
from runner.exitcodes import ExitCode
from runner.protocol.mcp import Tool, ToolAnnotations


def _step(idempotent: bool) -> SimpleNamespace:
    return SimpleNamespace(idempotent=idempotent)


def _tool(*, read_only: bool = False, idempotent: bool = False) -> Tool:
    return Tool(name="t", input_schema={}, annotations=ToolAnnotations(read_only=read_only, idempotent=idempotent))


def test_failure_kinds_and_safety_rule() -> None:
    assert failure_kind(NotDelivered("x")) == FailureKind.NOT_SENT
    assert failure_kind(OutcomeUnknown("x")) == FailureKind.OUTCOME_UNKNOWN
    assert failure_kind(CallTimeout("x")) == FailureKind.TIMEOUT
    assert failure_kind(JsonRpcError(1, "x")) == FailureKind.PROTOCOL_ERROR
    assert failure_kind(InvalidCall("x")) == FailureKind.INVALID_CALL
    assert is_safe_to_repeat(_step(True), False, _tool())
    assert is_safe_to_repeat(_step(True), False, None)
    assert not is_safe_to_repeat(_step(False), False, _tool(read_only=True, idempotent=True))
    assert is_safe_to_repeat(_step(False), True, _tool(read_only=True))
    assert is_safe_to_repeat(_step(False), True, _tool(idempotent=True))
    assert not is_safe_to_repeat(_step(False), True, _tool())
    assert not is_safe_to_repeat(_step(False), True, None)  # not known is not safe


def test_the_tool_list_is_read_only_when_it_decides() -> None:
    assert reads_annotations(_step(False), True)
    assert not reads_annotations(_step(True), True)
    assert not reads_annotations(_step(False), False)


def test_one_verdict_for_both_retry_loops() -> None:
    for exc in (NotDelivered("x"), SessionExpired("x")):
        for sent in (False, True):
            assert classify(exc, sent=sent, safe=False) is Verdict.RESEND
    for exc in (OutcomeUnknown("x"), CallTimeout("x")):
        assert wants_safety(exc)
        assert classify(exc, sent=True, safe=True) is Verdict.REPEAT
        assert classify(exc, sent=True, safe=False) is Verdict.IN_DOUBT
    assert not wants_safety(NotDelivered("x")) and not wants_safety(InvalidCall("x"))
    assert classify(ConnectFailed("x"), sent=False, safe=True) is Verdict.NOT_SENT
    assert classify(ConnectFailed("x"), sent=True, safe=True) is Verdict.FAILED
    assert classify(InvalidCall("x"), sent=False, safe=True) is Verdict.FAILED
    assert classify(JsonRpcError(1, "x"), sent=True, safe=True) is Verdict.FAILED
    assert classify(ProtocolError("x"), sent=True, safe=True) is Verdict.FAILED
    assert classify(trio.Cancelled._create(), sent=True, safe=True) is Verdict.IN_DOUBT  # type: ignore[attr-defined]


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
