"""Input that answers no call (:mod:`runner.session.stray`): lines that are not JSON-RPC and responses that
match no request, shown a few times, then counted."""

from __future__ import annotations

from runner.protocol.jsonrpc import ErrorResponse, InvalidMessage, Response
from runner.session import WARN_FIRST, SessionStats
from runner.session.stray import StrayInput


def test_stray_input_is_shown_a_few_times_then_counted() -> None:
    warnings: list[str] = []
    stray = StrayInput("srv", on_stdout=True, warn=warnings.append)
    for n in range(WARN_FIRST + 3):
        stray.invalid(InvalidMessage(f"log {n}".encode(), "not JSON: Expecting value"), failed_a_call=False)
    stray.invalid(InvalidMessage(b"{}", "no result", request_id=1), failed_a_call=True)
    assert stray.stats == SessionStats(invalid_lines=WARN_FIRST + 4)
    assert stray.first_invalid == b"log 0"
    assert warnings[0] == 'srv: ignored a line on stdout that is not JSON-RPC (not JSON): "log 0"'
    assert warnings[WARN_FIRST:] == ["srv: more output that is not JSON-RPC; further lines are only counted"]


def test_late_responses_are_counted_and_unmatched_ones_explained() -> None:
    warnings: list[str] = []
    stray = StrayInput("srv", on_stdout=False, warn=warnings.append)
    stray.unmatched(Response(2, {}), last_issued=5)  # ours, given up on
    stray.unmatched(Response("2", {}), last_issued=5)
    stray.unmatched(ErrorResponse(None, -32700, "parse error"), last_issued=5)
    stray.unmatched(Response(6, {}), last_issued=5)  # never issued
    assert stray.stats == SessionStats(unmatched_responses=3, late_responses=1)
    assert 'we sent the number 2, not the string "2"' in warnings[0]
    assert warnings[1].startswith("srv: ignored an error response with a null id: ")
    assert warnings[2].startswith("srv: ignored a response with id 6, which matches no request we sent: ")
