"""Rendering what is known before a run, with placeholders for the rest (runner/workflow/partial.py)."""

from __future__ import annotations

from typing import Any

from runner.workflow.context import make_context
from runner.workflow.expressions import Reference
from runner.workflow.partial import Unknown, contains_unknown, render_known, what_it_reads

CONTEXT = make_context(inputs={"out": "build", "n": 3}, env={"HOME": "/home/u"}, steps={})


def static(ref: Reference) -> bool:
    return ref.root in ("inputs", "env")


def test_known_templates_render_and_the_others_stand_as_placeholders() -> None:
    args: dict[str, Any] = {
        "out": "${{ inputs.out }}/html",
        "n": "${{ inputs.n }}",
        "path": "${{ item }}",
        "name": "page-${{ index }}.html",
        "list": ["${{ env.HOME }}", "${{ steps.a.text }}", 5],
        "fixed": {"deep": True},
    }
    partial = render_known(args, CONTEXT, static, loc=("steps", "s", "args"))
    value = partial.value
    assert value["out"] == "build/html" and value["n"] == 3 and value["fixed"] == {"deep": True}
    assert value["list"][0] == "/home/u" and value["list"][2] == 5
    unknowns = {u.loc: u for u in partial.unknowns}
    assert list(unknowns) == [
        ("steps", "s", "args", "path"),
        ("steps", "s", "args", "name"),
        ("steps", "s", "args", "list", 1),
    ]
    assert value["path"] is unknowns[("steps", "s", "args", "path")]
    assert not unknowns[("steps", "s", "args", "path")].text  # a whole template: any type
    assert unknowns[("steps", "s", "args", "name")].text  # text around it: surely a string
    assert unknowns[("steps", "s", "args", "list", 1)].reads == (Reference("steps", "a", "text"),)
    assert partial.errors == []


def test_a_known_template_that_fails_to_render_is_an_error_not_a_value() -> None:
    partial = render_known({"x": "${{ length(inputs.n) }}", "y": 1}, CONTEXT, static, loc=("args",))
    assert [loc for loc, _ in partial.errors] == [("args", "x")]
    assert "length" in str(partial.errors[0][1])
    assert isinstance(partial.value["x"], Unknown) and partial.value["y"] == 1
    assert partial.unknowns == []  # an error, not something to check at run time


def test_contains_unknown_looks_at_any_depth() -> None:
    partial = render_known({"a": [{"b": "${{ item }}"}], "c": 1}, CONTEXT, static)
    assert contains_unknown(partial.value)
    assert contains_unknown(partial.value["a"])
    assert not contains_unknown(partial.value["c"])
    assert not contains_unknown({"a": [1, {"b": "x"}]})


def test_what_an_unknown_reads_in_words() -> None:
    partial = render_known(
        {"a": "${{ item }}-${{ index }}", "b": "${{ steps.list.json }}", "c": "${{ inputs.x }}", "d": "${{ item.k }}"},
        CONTEXT,
        lambda ref: ref.root == "env",
    )
    assert [what_it_reads(u) for u in partial.unknowns] == [
        "the item",
        "step list",
        "input 'x', which has no value here",
        "the item",
    ]
