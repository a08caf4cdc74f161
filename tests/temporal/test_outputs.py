"""Outputs on Temporal as on the local engine: each rendered on its own (one that fails is named, the others
kept, exit 1), and an --output that cannot take them refused before the run starts."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.temporal.support import MODES, cli, dev_server, in_process_worker, summary_of, target_of

WORKFLOW = f"""version: 1
servers:
  modes:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(MODES))}, ok]
steps:
  a:
    server: modes
    tool: echo
    args: {{text: hello}}
outputs:
  good: ${{{{ steps.a.text }}}}
  bad: ${{{{ from_json(steps.a.text).x }}}}
"""


def test_an_output_that_fails_is_named_and_the_others_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW)

    async def on_temporal() -> tuple[int, str, str]:
        async with dev_server() as env, in_process_worker(env, "outs"):
            where = ("--temporal-address", target_of(env), "--task-queue", "outs")
            return await cli(str(path), "--engine", "temporal", *where, "--json", "--output", str(tmp_path / "o.json"))

    code, out, err = asyncio.run(on_temporal())
    assert code == 1, err
    summary = summary_of(out)
    assert summary["outputs"] == {"good": "hello"}
    assert [f["output"] for f in summary["outputs_failed"]] == ["bad"]
    assert json.loads((tmp_path / "o.json").read_text()) == {"good": "hello"}


@pytest.mark.parametrize("target", ["folder", "workflow"])
def test_an_output_with_nowhere_to_go_is_refused_before_the_run(tmp_path: Path, target: str) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW)
    (tmp_path / "folder").mkdir()
    output = tmp_path / "folder" if target == "folder" else path
    # No Temporal at this address: the refusal comes before any connection.
    code, _out, err = asyncio.run(
        cli(str(path), "--engine", "temporal", "--temporal-address", "127.0.0.1:9", "--output", str(output))
    )
    assert code == 2, err
    assert "nothing was called" in err
    assert path.read_text() == WORKFLOW
