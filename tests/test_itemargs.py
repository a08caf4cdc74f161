"""A fan-out's arguments (runner/engine/calls/args.py): rendered once for the whole step when they read neither
``item`` nor ``index``, and then exactly what rendering each item's would give: the same arguments, the same
template error for every item."""

from __future__ import annotations

from typing import Any

import trio

from runner.engine.calls.args import args_renderer
from runner.workflow.context import make_context
from tests.harness import Harness, echo_tools, plan_of, run_plan

FANOUT = """
version: 1
servers:
  s: {{command: [fake]}}
inputs:
  items: {{type: array, default: [a, b, c]}}
  prefix: {{type: string, default: p}}
  bad: {{type: string, default: "not json"}}
steps:
  each:
    server: s
    tool: echo
    for_each: ${{{{ inputs.items }}}}
    args: {args}
"""


def renders(args: str) -> tuple[list[Any], int]:
    """Each item's arguments for the fan-out of ``FANOUT``, and how many contexts were built to render them."""
    plan = plan_of(FANOUT.format(args=args))
    built = 0

    def context(item: Any, index: int | None) -> dict[str, Any]:
        nonlocal built
        built += 1
        inputs = {"items": ["a", "b", "c"], "prefix": "p", "bad": "not json"}
        return make_context(inputs=inputs, env={}, steps={}, item=item, index=index)

    render = args_renderer(plan.steps["each"], context)
    return [render(item, index) for index, item in enumerate("abc")], built


def test_arguments_that_read_no_item_are_rendered_once_and_shared() -> None:
    found, built = renders('{text: "${{ inputs.prefix }}-x", n: [1, "${{ inputs.prefix }}"]}')
    assert found == [{"text": "p-x", "n": [1, "p"]}] * 3
    assert built == 1 and found[0] is found[1] is found[2]


def test_arguments_that_read_the_item_or_its_index_are_rendered_for_each() -> None:
    found, built = renders('{text: "${{ inputs.prefix }}", deep: [{at: "${{ index }}"}]}')
    assert found == [{"text": "p", "deep": [{"at": i}]} for i in range(3)] and built == 3
    found, built = renders('{text: "${{ item }}"}')
    assert found == [{"text": "a"}, {"text": "b"}, {"text": "c"}] and built == 3


async def test_a_template_error_rendered_once_fails_every_item_alike(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": echo_tools})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(
        plan_of(FANOUT.format(args='{text: "${{ from_json(inputs.bad) }}"}')), harness, events=events
    )
    failed = [e for e in events if e["type"] == "item_failed"]
    assert [(e["item"], e["kind"]) for e in failed] == [(k, "template-error") for k in ("a", "b", "c")]
    assert len({e["error"] for e in failed}) == 1 and "from_json" in failed[0]["error"]
    assert harness.calls("s") == [] and outcome.steps["each"].counts()["failed"] == 3


async def test_items_receive_their_own_arguments_or_the_shared_ones(autojump_clock: trio.abc.Clock) -> None:
    for args, expected in (
        ('{text: "${{ inputs.prefix }}"}', ["p", "p", "p"]),
        ('{text: "${{ inputs.prefix }}${{ index }}"}', ["p0", "p1", "p2"]),
    ):
        harness = Harness({"s": echo_tools})
        outcome = await run_plan(plan_of(FANOUT.format(args=args)), harness)
        assert outcome.status == "succeeded"
        assert sorted(c.params["arguments"]["text"] for c in harness.calls("s")) == expected
