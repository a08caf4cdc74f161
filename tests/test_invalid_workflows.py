"""Every file in ``workflows_invalid/`` is one invalid workflow; its sibling ``.expected`` file holds the
exact text of the error (``str(WorkflowError)``, with the file named by its base name).

To add a case: write ``NAME.yaml``, run the workflow through ``validate(parse_workflow(text,
file="NAME.yaml"))`` and, once the message reads right, save it (plus a final newline) as ``NAME.expected``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import WorkflowError
from runner.workflow.loader import parse_workflow, validate
from runner.workflow.positions import WorkflowErrors

HERE = Path(__file__).parent / "workflows_invalid"
CASES = sorted(HERE.glob("*.yaml"))


def _error_for(path: Path) -> WorkflowError:
    with pytest.raises(WorkflowError) as info:
        validate(parse_workflow(path.read_text(encoding="utf-8"), file=path.name))
    return info.value


def test_enough_cases() -> None:
    assert len(CASES) >= 15
    assert all(case.with_suffix(".expected").exists() for case in CASES)


@pytest.mark.parametrize("path", CASES, ids=[case.stem for case in CASES])
def test_exact_message(path: Path) -> None:
    expected = path.with_suffix(".expected").read_text(encoding="utf-8").rstrip("\n")
    assert str(_error_for(path)) == expected


@pytest.mark.parametrize("path", CASES, ids=[case.stem for case in CASES])
def test_every_error_is_located(path: Path) -> None:
    error = _error_for(path)
    for each in error.errors if isinstance(error, WorkflowErrors) else [error]:
        assert each.file == path.name
        assert each.line is not None and each.column is not None
        assert each.message[:1].islower() or not each.message[:1].isalpha()


def test_several_problems_are_reported_together() -> None:
    error = _error_for(HERE / "several_errors.yaml")
    assert isinstance(error, WorkflowErrors)
    assert [e.path for e in error.errors] == ["steps.read.server", "steps.write.args.content"]
    assert error.line == error.errors[0].line
