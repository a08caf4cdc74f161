"""What a resume on Temporal compares with the open run: the local engine's rules, from the run's memo."""

from __future__ import annotations

from dataclasses import replace

from runner.temporal.changes import changes_since, memo_of
from runner.temporal.spec import RunSpec

SPEC = RunSpec(
    run_id="r1",
    workflow="/w.yaml",
    text="version: 1",
    inputs={"n": 1},
    fingerprints={"a": "fa", "b": "fb"},
    workflow_hash="h1",
)


def test_the_same_definition_has_no_changes() -> None:
    assert changes_since(memo_of(SPEC), replace(SPEC, run_id="r2")) == []


def test_each_change_is_named_as_locally() -> None:
    now = replace(SPEC, workflow_hash="h2", fingerprints={"a": "fa", "b": "fb2", "c": "fc"}, inputs={"n": 2})
    assert changes_since(memo_of(SPEC), now) == [
        "the workflow file changed since the run started",
        "steps whose definition or inputs changed: b, c",
        "the inputs changed since the run started",
    ]


def test_a_run_whose_memo_keeps_nothing_to_compare_is_not_refused() -> None:
    assert changes_since({"workflow": "/w.yaml", "run_id": "r1"}, SPEC) == []
