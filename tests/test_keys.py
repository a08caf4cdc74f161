"""Fan-out items' keys: readable labels for new runs, full hashes kept for runs whose journal is of format 1,
and result entries that carry the item they answer."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st

from runner.engine.core.events import JOURNAL_FORMAT, encode
from runner.exitcodes import ExitCode
from runner.workflow.keys import HASH_DIGITS, LABEL_LIMIT, default_key
from tests.harness import CHAIN, Harness, Resume, echo_tools, plan_of, run_plan
from tests.support import entry


def sha(item: Any) -> str:
    return hashlib.sha256(
        json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


def test_short_scalars_are_their_own_key() -> None:
    assert default_key("alpha") == "alpha"
    assert default_key("docs/a b.md") == "docs/a b.md"
    assert default_key("é" * LABEL_LIMIT) == "é" * LABEL_LIMIT
    assert default_key(7) == "7"
    assert default_key(-2.5) == "-2.5"
    assert default_key(True) == "true"


def test_anything_else_is_a_short_hash() -> None:
    for item in [
        {"b": 1, "a": "é"},
        [1, 2],
        None,
        "",
        "x" * (LABEL_LIMIT + 1),
        "two\nlines",
        " padded",
        "#looks-like-a-hash",
        float("nan"),
    ]:
        key = default_key(item)
        assert key == "#" + sha(item)[:HASH_DIGITS], item


def test_a_format_1_journal_keys_by_the_full_hash() -> None:
    assert default_key("alpha", full_hash=True) == sha("alpha")
    assert default_key({"b": 1, "a": "é"}, full_hash=True) == sha({"a": "é", "b": 1})


@given(st.lists(st.text(min_size=1, max_size=60), unique=True))
def test_distinct_strings_have_distinct_keys(items: list[str]) -> None:
    keys = [default_key(item) for item in items]
    assert len(set(keys)) == len(keys)
    for item, key in zip(items, keys, strict=True):
        assert key == item or (key.startswith("#") and len(key) == HASH_DIGITS + 1)


FANOUT_TWICE = """
version: 1
servers:
  s: {command: [fake]}
steps:
  files:
    server: s
    tool: listing
    args: {n: 3}
  read:
    server: s
    tool: upper
    for_each: ${{ steps.files.json }}
    args: {text: "${{ item }}"}
  write:
    server: s
    tool: echo
    for_each: ${{ steps.read.results[?status == 'succeeded'] }}
    args: {text: "${{ item.key }}#${{ item.index }}=${{ item.item }}->${{ item.text }}"}
outputs:
  written: ${{ steps.write.results[*].text }}
  keys: ${{ steps.write.results[*].key }}
"""


async def test_results_carry_their_item_so_a_second_fan_out_can_chain(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(FANOUT_TWICE), harness)
    assert outcome.exit_code == ExitCode.OK
    assert outcome.outputs["written"] == ["f0#0=f0->F0", "f1#1=f1->F1", "f2#2=f2->F2"]
    # the second fan-out's items are result entries (objects): each is keyed by a short hash
    assert all(key.startswith("#") for key in outcome.outputs["keys"])


async def test_a_run_begun_in_format_1_resumes_with_its_own_keys(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(CHAIN)
    for journal, reused in ((None, 2), (JOURNAL_FORMAT, 0)):
        # the first attempt began in format 1 (no journal field) or in the current format
        started = encode(entry({"type": "run_started", "journal": journal}))
        events: list[dict[str, Any]] = []
        await run_plan(plan, Harness({"s": echo_tools}), prior=Resume(events=[started]), events=events, concurrency=1)
        items = [e["item"] for e in events if e["type"] == "item_succeeded" and e["step"] == "convert"]
        assert items == ([sha(f"f{i}") for i in range(4)] if journal is None else [f"f{i}" for i in range(4)])
        successes = [i for i, e in enumerate(events) if e["type"] == "item_succeeded"]
        cut = [started, *events[: successes[2] + 1]]
        # a format-1 journal with keys made the new way (as a bug would) reuses nothing: the test can fail
        if journal is not None:
            cut[0] = encode(entry({"type": "run_started", "journal": None}))
        harness = Harness({"s": echo_tools})
        outcome = await run_plan(plan, harness, prior=Resume(events=cut))
        assert outcome.outputs == {"report": "F0,F1,F2,F3", "count": 4}
        assert outcome.steps["convert"].reused == reused


SECRET_ITEMS = """
version: 1
servers:
  s: {command: [fake]}
steps:
  each:
    server: s
    tool: echo
    for_each: ["alpha", "beta"]
    KEY
    args: {text: "${{ item }}"}
"""


async def test_a_key_holding_a_secret_fails_the_step_before_any_call(autojump_clock: trio.abc.Clock) -> None:
    """A key is journaled as it is: masked, it would stop matching its item when the secret changes, and a
    resume would call that item again. So a key that holds a secret's value is refused, whatever made it."""
    for key_line, ok in (("", False), ("key: ${{ item }}", False), ("key: k-${{ index }}", True)):
        harness = Harness({"s": echo_tools})
        plan = plan_of(SECRET_ITEMS.replace("KEY", key_line))
        outcome = await run_plan(plan, harness, secrets={"env.MY_TAG": "alpha"})
        if ok:
            assert outcome.exit_code == ExitCode.OK
            continue
        assert harness.calls("s") == []
        assert outcome.exit_code == ExitCode.FAILED
        assert outcome.steps["each"].reason == (
            "the key of item 0 of step 'each' holds the value of env.MY_TAG; keys are journaled as "
            "they are, never masked: give the step a `key` without secrets"
        )


async def test_items_that_read_the_same_have_the_same_key(autojump_clock: trio.abc.Clock) -> None:
    plan = plan_of(SECRET_ITEMS.replace('["alpha", "beta"]', '[1, "1"]').replace("KEY", ""))
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness)
    assert harness.calls("s") == [] and outcome.exit_code == ExitCode.FAILED
    assert "items 0 and 1 have the same key '1'" in str(outcome.steps["each"].reason)
