"""Slices of a fan-out by reference: cut into batches, and rendered from the run's definition alone as the
run's workflow renders them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.temporal.batch import Sessions
from runner.temporal.slices import by_reference, index_batches, render_slice, slice_of
from runner.temporal.spec import RunSpec, build_plan_of

WORKFLOW = """\
version: 1
name: fan
servers:
  s: {command: [echo]}
inputs:
  names: {type: array, default: [a, b, c, d, e]}
steps:
  first:
    server: s
    tool: t
    for_each: ${{ inputs.names }}
    key: ${{ item }}-k
    args: {text: "${{ item }} ${{ index }} ${{ env.TOKEN }}"}
  second:
    server: s
    tool: t
    for_each: ${{ steps.first.results }}
    args: {text: "${{ item.text }}"}
"""


def _spec(tmp_path: Path) -> RunSpec:
    return RunSpec(run_id="r", workflow=str(tmp_path / "w.yaml"), text=WORKFLOW, env={"TOKEN": True}, child_items=2)


def test_a_step_reading_only_inputs_env_item_and_index_goes_by_reference(tmp_path: Path) -> None:
    plan = build_plan_of(_spec(tmp_path))
    assert by_reference(plan.steps["first"])
    assert not by_reference(plan.steps["second"])  # its items are an earlier step's results: the calls travel


def test_a_slice_renders_as_the_run_renders_its_calls_with_env_as_placeholders(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    calls = render_slice(spec, build_plan_of(spec), "first", {"start": 1, "stop": 4, "skip": [2]})
    assert calls == [
        {"key": "b-k", "index": 1, "args": {"text": "b 1 ***env.TOKEN***"}, "at": 1},
        {"key": "d-k", "index": 3, "args": {"text": "d 3 ***env.TOKEN***"}, "at": 3},
    ]
    assert slice_of(calls) == {"start": 1, "stop": 4, "skip": [2]}


def test_a_slice_past_the_items_stops_at_the_last(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    calls = render_slice(spec, build_plan_of(spec), "first", {"start": 3, "stop": 9, "skip": []})
    assert [c["at"] for c in calls] == [3, 4]


@given(
    start=st.integers(0, 50),
    length=st.integers(1, 80),
    size=st.integers(1, 12),
    data=st.data(),
)
def test_batches_of_a_slice_call_each_item_once_in_order_at_most_size_each(
    start: int, length: int, size: int, data: st.DataObject
) -> None:
    stop = start + length
    skip = sorted(data.draw(st.sets(st.integers(start, stop - 1))))
    piece = {"start": start, "stop": stop, "skip": skip}
    wanted = [at for at in range(start, stop) if at not in skip]
    batches = index_batches(piece, size)
    called = [[at for at in range(b["start"], b["stop"]) if at not in b["skip"]] for b in batches]
    assert [at for batch in called for at in batch] == wanted
    assert all(0 < len(batch) <= size for batch in called)
    assert all(len(batch) == size for batch in called[:-1])
    assert all(b["start"] not in b["skip"] and b["stop"] - 1 not in b["skip"] for b in batches[:-1])


def test_rendered_calls_are_cut_by_count_and_by_the_size_of_their_arguments() -> None:
    from runner.temporal.fanout import slices

    calls = [{"key": f"k{i}", "args": {"text": "x" * (600 if i in (2, 3) else 10)}} for i in range(7)]
    assert [len(part) for part in slices(calls, 3, None)] == [3, 3, 1]
    cut = slices(calls, 3, 1000)  # items 2 and 3 weigh ~613 bytes each: they cannot share a part
    assert [[c["key"] for c in part] for part in cut] == [["k0", "k1", "k2"], ["k3", "k4", "k5"], ["k6"]]
    alone = slices(calls, 10, 100)  # a call over the budget goes alone, never dropped
    assert [c["key"] for part in alone for c in part] == [f"k{i}" for i in range(7)]
    assert ["k2"] in [[c["key"] for c in part] for part in alone]
    assert slices([], 3) == []


def test_an_input_that_looks_like_a_placeholder_reaches_the_server_as_that_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow renders encoded text; the activity decodes it with the worker's masker: the env the
    templates saw as a placeholder becomes the worker's value, an input (or a server's result) that only looks
    like one stays the text it was."""
    monkeypatch.setenv("TOKEN", "tok-0123456789")
    forged = ["***env.TOKEN***", "x ***env.TOKEN:json*** ***"]
    spec = RunSpec(
        run_id="r", workflow=str(tmp_path / "w.yaml"), text=WORKFLOW, inputs={"names": forged}, env={"TOKEN": True}
    )
    calls = render_slice(spec, build_plan_of(spec), "first", {"start": 0, "stop": 2, "skip": []})
    masker = Sessions(cast(Any, None)).masker(spec)  # the worker's: its environment's values
    sent = [masker.decode_value(call["args"]) for call in calls]
    assert sent == [
        {"text": "***env.TOKEN*** 0 tok-0123456789"},
        {"text": "x ***env.TOKEN:json*** *** 1 tok-0123456789"},
    ]
    # What a call returns is encoded before it enters the history: a later call's arguments built from it
    # decode to the server's text, and a secret it echoed back to the secret.
    result = masker.encode_value({"text": "***env.TOKEN*** and tok-0123456789"})
    assert result == {"text": "***=env.TOKEN***= and ***env.TOKEN***"}
    assert masker.decode_value(result) == {"text": "***env.TOKEN*** and tok-0123456789"}


@pytest.mark.parametrize(
    ("calls", "concurrency", "given", "size"),
    [
        (10, 8, 0, 100),  # a small fan-out: one batch
        (1_000, 16, 0, 250),  # cut into four
        (1_000, 64, 0, 256),  # a batch keeps four times the server's calls in flight
        (2_000, 8, 0, 500),  # a child's slice: at most MAX_BATCH
        (100_000, 8, 0, 500),
        (1_000, 16, 100, 100),  # --batch-size, or a definition from before sized batches
        (1_000, 16, 20, 20),
    ],
)
def test_batch_size_is_sized_by_the_fan_out_unless_given(calls: int, concurrency: int, given: int, size: int) -> None:
    from runner.temporal.spec import batch_size_for

    spec = RunSpec(run_id="r", workflow="w.yaml", text=WORKFLOW, batch_size=given)
    assert batch_size_for(spec, calls, concurrency) == size
    assert RunSpec.from_json({**spec.to_json(), "batch_size": 100}).batch_size == 100  # an older definition's
