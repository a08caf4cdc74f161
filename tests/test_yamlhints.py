"""The quoting hints of YAML syntax errors: the fixed line they show, put in place of the line, is valid."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runner.errors import WorkflowError
from runner.workflow.loader import parse_workflow, validate
from runner.workflow.yamlhints import quote_value, quoting_hint

HERE = Path(__file__).parent / "workflows_invalid"
QUOTING_CASES = ["yaml_colon_in_template", "yaml_colon_in_value", "yaml_template_in_flow"]


@pytest.mark.parametrize("name", QUOTING_CASES)
def test_the_fixed_line_makes_the_workflow_valid(name: str) -> None:
    path = HERE / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    with pytest.raises(WorkflowError) as info:
        parse_workflow(text, file=path.name)
    error = info.value
    assert error.suggestion is not None and error.line is not None
    fixed = error.suggestion.split("): ", 1)[1]
    lines = text.splitlines()
    bad = lines[error.line - 1]
    lines[error.line - 1] = bad[: len(bad) - len(bad.lstrip())] + fixed
    validate(parse_workflow("\n".join(lines) + "\n", file=path.name))


@pytest.mark.parametrize(
    "value",
    ["plain: text", "${{ format('a: {}', item) }}", 'it\'s "quoted"', "back\\slash 'and' quote", "'", ""],
)
def test_quote_value_holds_the_text_exactly(value: str) -> None:
    assert yaml.safe_load(f"k: {quote_value(value)}") == {"k": value}


def test_no_hint_where_quoting_is_not_the_fix() -> None:
    assert quoting_hint("mapping values are not allowed here", "  key: 'already: quoted': x") is None
    assert quoting_hint("mapping values are not allowed here", "  : nothing") is None
    assert quoting_hint("expected ',' or '}', but got '<scalar>'", "  fs: {command: [server-fs]") is None
    assert quoting_hint("found undefined alias", "text: ${{ a: b }}") is None


def test_a_comment_stays_outside_the_quotes() -> None:
    hint = quoting_hint("mapping values are not allowed here", "    text: a: b  # why")
    assert hint is not None and hint.endswith("text: 'a: b'  # why")
