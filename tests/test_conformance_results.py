"""Judging the conformance suite's results (runner/testing/conformance_results.py), on results written here
in the suite's format: a scenario passes only when a check succeeded and none failed or warned, one whose
checks were all skipped tested nothing, and each group must match its expected-failures file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.testing.conformance_results import (
    GroupResults,
    Outcome,
    ResultsError,
    check_group,
    judge_checks,
    load_expected,
    load_group,
    main,
)


def _check(status: str, check_id: str = "c", message: str | None = None) -> dict[str, Any]:
    check: dict[str, Any] = {"id": check_id, "name": check_id, "status": status, "description": f"{check_id} d"}
    if message is not None:
        check["errorMessage"] = message
    return check


def _write_run(
    group: Path, scenario: str, checks: list[dict[str, Any]] | None, *, code: int = 0, scored: bool = True
) -> None:
    """One scenario's results as scripts/conformance.sh leaves them: the suite's -o folder and a runs.tsv line."""
    safe = scenario.replace("/", "_")
    if checks is not None:
        out = group / safe / f"{scenario}-2026-12-01T00-00-00-000Z"
        out.mkdir(parents=True)
        (out / "checks.json").write_text(json.dumps(checks), encoding="utf-8")
    else:
        (group / safe).mkdir(parents=True)
    with (group / "runs.tsv").open("a", encoding="utf-8") as f:
        f.write(f"{scenario}\t{int(scored)}\t{code}\t{safe}\n")


def test_a_scenario_passes_only_with_a_success_and_no_failure_or_warning() -> None:
    assert judge_checks([_check("SUCCESS"), _check("INFO")], 0) == ""
    assert judge_checks([_check("SUCCESS"), _check("FAILURE", "x", "went wrong")], 1) == "FAILURE x: went wrong"
    assert judge_checks([_check("WARNING", "slow"), _check("SUCCESS")], 1).startswith("WARNING slow: ")
    two = judge_checks([_check("FAILURE", "a"), _check("FAILURE", "b")], 1)
    assert two == "FAILURE a: a d (+1 more)"


def test_a_scenario_whose_checks_were_all_skipped_is_a_failure() -> None:
    reason = judge_checks([_check("SKIPPED"), _check("SKIPPED"), _check("INFO")], 0)
    assert reason == "tested nothing: no check succeeded (3 checks, 2 skipped)"
    assert judge_checks([], 0).startswith("tested nothing")


def test_a_failed_client_fails_the_scenario_even_with_good_checks() -> None:
    assert judge_checks([_check("SUCCESS")], 1) == "the suite exited 1 (the client failed or timed out)"


def test_load_group_reads_runs_and_checks(tmp_path: Path) -> None:
    group = tmp_path / "2026-07-28"
    _write_run(group, "tools_call", [_check("SUCCESS")])
    _write_run(group, "auth/iss-supported", [_check("FAILURE", "iss")], code=1)
    _write_run(group, "json-schema-2020-12-preservation", [_check("SKIPPED")], scored=False)
    _write_run(group, "vanished", None, code=1)
    results = load_group(group)
    assert results.group == "2026-07-28"
    by_name = {o.scenario: o for o in results.outcomes}
    assert by_name["tools_call"] == Outcome("tools_call", True, True)
    assert not by_name["auth/iss-supported"].passed
    assert not by_name["json-schema-2020-12-preservation"].scored
    assert by_name["json-schema-2020-12-preservation"].reason.startswith("tested nothing")
    assert by_name["vanished"].reason == "no checks recorded (the suite exited 1 without results)"
    assert results.score() == (1, 3)  # scored only: tools_call, auth/iss-supported, vanished
    assert [o.scenario for o in results.outcomes][-1] == "auth/iss-supported"  # auth last


def test_a_malformed_runs_line_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "runs.tsv").write_text("tools_call\tyes\t0\tdir\n", encoding="utf-8")
    with pytest.raises(ResultsError, match=r"runs.tsv:1: expected NAME, SCORED"):
        load_group(tmp_path / "g")


def test_expected_failures_need_a_reason_each(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text('client:\n  sse-retry: "too slow"\n', encoding="utf-8")
    assert load_expected(good) == {"sse-retry": "too slow"}
    bare = tmp_path / "bare.yaml"
    bare.write_text("client:\n  - sse-retry\n", encoding="utf-8")
    with pytest.raises(ResultsError, match="must map each scenario name to a one-line reason"):
        load_expected(bare)
    empty_reason = tmp_path / "empty.yaml"
    empty_reason.write_text("client:\n  sse-retry: ''\n", encoding="utf-8")
    with pytest.raises(ResultsError, match="'sse-retry' needs a one-line reason"):
        load_expected(empty_reason)
    with pytest.raises(ResultsError, match=r"missing\.yaml"):
        load_expected(tmp_path / "missing.yaml")


def test_check_group_reports_unexpected_failures_passes_and_stale_entries() -> None:
    results = GroupResults(
        "2025-11-25",
        (Outcome("a", True, True), Outcome("b", True, False, "FAILURE x: y"), Outcome("c", True, False, "z")),
    )
    problems = check_group(results, {"a": "r", "c": "r", "gone": "r"}, complete=True)
    assert problems == [
        "a: passed, but is listed as an expected failure: remove its entry",
        "b: failed: FAILURE x: y",
        "gone: listed as an expected failure, but the suite has no such scenario",
    ]
    assert check_group(results, {"b": "r", "c": "r", "gone": "r"}, complete=False) == []


def test_main_check_and_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    expected = tmp_path / "expected"
    expected.mkdir()
    _write_run(results / "2025-11-25", "initialize", [_check("SUCCESS")])
    _write_run(results / "2025-11-25", "sse-retry", [_check("SKIPPED")])
    (expected / "expected-failures-2025-11-25.yaml").write_text('client:\n  sse-retry: "reason"\n', encoding="utf-8")
    assert main(["check", str(results), str(expected)]) == 0
    out = capsys.readouterr().out
    assert "== 2025-11-25: 1 / 2 required scenarios passed" in out
    assert "expected failure  sse-retry: reason" in out

    (expected / "expected-failures-2025-11-25.yaml").write_text("client: {}\n", encoding="utf-8")
    assert main(["check", str(results), str(expected)]) == 1
    assert "2025-11-25 sse-retry: failed: tested nothing" in capsys.readouterr().err

    assert main(["scores", f"mcp-run={results}", f"sdk={results}"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1].split() == ["2025-11-25", "1", "/", "2", "1", "/", "2"]
    assert main(["nonsense"]) == 2
    assert main(["check", str(tmp_path / "none"), str(expected)]) == 1
    assert "no group of results" in capsys.readouterr().err
