"""``mcp-run report --engine temporal``: the report of a run on Temporal, from its workflow's history (as ``show``
reads it): the item in doubt is a JUnit failure, and the page gives the commands that decide, with the engine."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.temporal.support import cli, dev_server, fan_out_workflow, in_process_worker, target_of


@pytest.mark.slow
def test_report_of_a_run_on_temporal(tmp_path: Path) -> None:
    workflow = fan_out_workflow(tmp_path, 1, mode="die-on-call")  # its one call is in doubt: exit 5
    junit, page = tmp_path / "junit.xml", tmp_path / "report.html"

    async def on_temporal() -> tuple[tuple[int, str, str], tuple[int, str, str], str]:
        async with dev_server() as env, in_process_worker(env, "report"):
            here = ("--temporal-address", target_of(env))
            run = await cli(str(workflow), "--engine", "temporal", *here, "--task-queue", "report")
            run_id = run[2].split()[1]
            report = await cli(
                "report", run_id.split("-")[-2], "--engine", "temporal", *here, "--junit", str(junit), "--html",
                str(page),
            )  # fmt: skip
            return run, report, run_id

    run, report, run_id = asyncio.run(on_temporal())
    assert run[0] == 5, run[2]
    code, _out, err = report
    assert code == 0 and f"run {run_id}: in-doubt; wrote" in err, err
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.get("name") == "k0000" and case.find("failure") is not None
    text = page.read_text()
    assert f"mcp-run resume {run_id} --engine temporal --temporal-address" in text and "--skip-in-doubt" in text
