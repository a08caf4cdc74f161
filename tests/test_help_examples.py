"""The examples ``--help`` prints name workflows that exist and inputs those workflows have."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from runner.cli import EXAMPLES
from runner.cli.run import RUN_EXAMPLES

ROOT = Path(__file__).resolve().parents[1]


def test_every_example_names_a_real_workflow_and_its_inputs() -> None:
    checked = 0
    for line in (EXAMPLES + RUN_EXAMPLES).splitlines():
        workflow = re.search(r"(workflows/\S+\.yaml)", line)
        if workflow is None:
            continue
        path = ROOT / workflow.group(1)
        assert path.is_file(), line
        inputs = yaml.safe_load(path.read_text()).get("inputs") or {}
        for name in re.findall(r"--input (\w+)=", line):
            assert name in inputs, f"{line.strip()}: {path.name} has no input {name!r} (it has {sorted(inputs)})"
            checked += 1
    assert checked >= 2
