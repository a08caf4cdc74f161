"""``mcp-run report``: the report model of a real run's journal (succeeded, failed, retried, in-doubt and skipped
work), and its JUnit XML, read back with ``xml.etree``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from runner.cli import main
from runner.engine.journal.reader import iter_journal
from runner.report.junit import junit_xml
from runner.report.lanes import CallSpan, Outcome, WaitSpan, lanes_of
from runner.report.model import RunReportModel, build
from tests.report_run import RUN_ID, SECRET_INPUT, WORKFLOW, write_run, write_run_of_file
from tests.support import entries


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("state"))


@pytest.fixture(scope="module")
def model(run_dir: Path) -> RunReportModel:
    with (run_dir / "journal.jsonl").open("rb") as f:
        return build(iter_journal(f), decisions=["mcp-run resume x --rerun-in-doubt"])


def test_the_model_counts_as_the_fold_does(model: RunReportModel) -> None:
    assert model.run_id == RUN_ID and model.status == "in-doubt" and model.exit_code == 5
    steps = {s.id: s for s in model.steps}
    convert = steps["convert"]
    assert (convert.total, convert.succeeded, convert.failed, convert.in_doubt) == (6, 2, 3, 1)
    assert steps["report"].status == "skipped" and steps["notes"].status == "succeeded"
    by_key = {(i.step, i.key): i for i in model.items}
    assert by_key[("convert", "f3")].status == "in-doubt" and by_key[("convert", "f3")].kind == "timeout"
    # The run's first call (of files or notes: trio runs them in either order) was never delivered: retried.
    assert sorted([by_key[("files", "")].attempts, by_key[("notes", "")].attempts]) == [1, 2]
    assert [i.key for i in model.in_doubt] == ["f3"]
    assert model.inputs["token"] == SECRET_INPUT  # as the journal holds it: masked


def test_failures_are_grouped_by_their_error(model: RunReportModel) -> None:
    groups = [(g.kind, g.error, sorted(k for _s, k in g.items)) for g in model.failures]
    assert groups == [
        ("tool-error", "disk full", ["f1", "f4"]),
        ("tool-error", "cannot convert f2 <b>&</b>", ["f2"]),
    ]


def test_lanes_count_every_call_and_the_retry(model: RunReportModel) -> None:
    (lane,) = model.lanes
    assert lane.server == "s"
    totals = lane.totals
    # 1 listing + 2 attempts of notes + 6 conversions; the first attempt of notes was retried.
    assert (lane.calls, totals.succeeded, totals.failed, totals.retried, totals.in_doubt) == (9, 4, 3, 1, 1)
    assert sum(b.ended for b in lane.buckets) == 9
    # The retried call's wait: from its failed attempt's answer to the next dispatch.
    assert lane.waits == 1 and lane.totals.waiting > 0
    assert sum(b.waiting for b in lane.buckets) == pytest.approx(lane.totals.waiting)
    (server,) = model.servers
    assert (server.name, server.server_name, server.reconnects) == ("s", "fake", 1)


def test_lanes_aggregate_into_a_fixed_number_of_buckets() -> None:
    spans = [CallSpan("a", i * 0.01, i * 0.01 + 0.5, Outcome.SUCCEEDED) for i in range(100_000)]
    (lane,), width = lanes_of(spans, 0.0, 1000.5, 50)
    assert len(lane.buckets) == 50 and width == pytest.approx(1000.5 / 50)
    assert sum(b.succeeded for b in lane.buckets) == 100_000
    assert sum(b.busy for b in lane.buckets) == pytest.approx(100_000 * 0.5)


def test_retry_waits_spread_over_the_buckets_they_cross() -> None:
    spans = [CallSpan("a", 0.0, 1.0, Outcome.RETRIED), CallSpan("a", 31.0, 32.0, Outcome.SUCCEEDED)]
    (lane,), width = lanes_of(spans, 0.0, 40.0, 4, [WaitSpan("a", 1.0, 31.0)])
    assert width == 10.0 and (lane.waits, lane.totals.waiting) == (1, 30.0)
    assert [b.waiting for b in lane.buckets] == [9.0, 10.0, 10.0, 1.0]
    assert [b.busy for b in lane.buckets] == [1.0, 0.0, 0.0, 1.0]


def test_junit_has_a_testcase_per_item_and_failures_for_failed_and_in_doubt(model: RunReportModel) -> None:
    root = ET.fromstring(junit_xml(model))
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert sorted(suites) == ["convert", "files", "notes", "report"]
    convert = suites["convert"]
    cases = {c.get("name"): c for c in convert.iter("testcase")}
    assert sorted(cases) == ["f0", "f1", "f2", "f3", "f4", "f5"]
    failed = {name for name, c in cases.items() if c.find("failure") is not None}
    assert failed == {"f1", "f2", "f3", "f4"}
    assert convert.get("tests") == "6" and convert.get("failures") == "4"
    f3 = cases["f3"].find("failure")
    assert f3 is not None and f3.get("type") == "timeout" and "in doubt" in (f3.get("message") or "")
    f1 = cases["f1"].find("failure")
    assert f1 is not None and f1.get("message") == "disk full" and f1.text == "disk full\nwhile writing"
    (notes,) = suites["notes"].iter("testcase")  # a single call: one testcase named after its step
    assert notes.get("name") == "notes" and notes.find("failure") is None
    (report,) = suites["report"].iter("testcase")
    skipped = report.find("skipped")
    assert skipped is not None and "in doubt" in (skipped.get("message") or "")
    assert root.get("tests") == "9" and root.get("failures") == "4" and root.get("skipped") == "1"


def test_junit_always_parses_whatever_the_text() -> None:
    from tests.support import entry

    entries = [
        entry({"type": "run_started"}, seq=1),
        entry({"type": "step_started", "step": "s", "items": 1}, seq=2),
        entry({"type": "item_dispatched", "step": "s", "item": "k\x01", "index": 0}, seq=3),
        entry({"type": "item_failed", "step": "s", "item": "k\x01", "error": "bad \x00\x1b[31m ]]> \udcff"}, seq=4),
    ]
    root = ET.fromstring(junit_xml(build(entries)))
    failure = next(root.iter("failure"))
    assert "]]>" in (failure.text or "") and "\x00" not in (failure.text or "")


def test_report_command_writes_junit_for_a_run_named_as_show_names_it(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = run_dir.parent.parent
    out = tmp_path / "junit.xml"
    code = main(["report", RUN_ID[-6:], "--state-dir", str(state_dir), "--junit", str(out)])
    assert code == 0, capsys.readouterr().err
    assert ET.parse(out).getroot().get("failures") == "4"
    assert f"run {RUN_ID}: in-doubt" in capsys.readouterr().err


def test_report_command_refuses_without_an_output_or_an_unknown_run(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = str(run_dir.parent.parent)
    assert main(["report", RUN_ID, "--state-dir", state_dir]) == 2
    assert "--html PATH" in capsys.readouterr().err
    assert main(["report", "nosuch", "--state-dir", state_dir, "--junit", str(tmp_path / "j.xml")]) == 2
    assert "no run 'nosuch'" in capsys.readouterr().err
    assert main(["report", RUN_ID, "--state-dir", state_dir, "--junit", str(tmp_path / "no" / "j.xml")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_show_item_prints_its_status_result_and_events(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_dir = str(run_dir.parent.parent)
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "f1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("item convert[f1]: failed\n")
    assert "error     tool error: disk full while writing" in out
    assert '"text": "disk full\\nwhile writing"' in out  # its result, as JSON
    assert "dispatched to s mixed, attempt 1" in out and "failed: tool-error: disk full" in out
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "f3", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["status"], record["kind"], record["tool"]) == ("in-doubt", "timeout", "mixed")
    assert [e["type"] for e in record["events"]] == ["item_dispatched", "item_failed"]
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "notes"]) == 0  # a plain step, by its id
    assert capsys.readouterr().out.startswith("item notes: succeeded\n")


def test_show_item_renders_its_arguments_from_the_workflow_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal holds no arguments: they are rendered again from the file and the journaled results (the
    fan-out's items come from step ``files``'s result), and said to be; once the step changed, not shown."""
    run = write_run_of_file(tmp_path)
    state_dir = str(run.parent.parent)
    workflow = tmp_path / "report.yaml"
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "f2"]) == 0
    out = capsys.readouterr().out
    assert f"arguments (as rendered from {workflow} now; the journal does not hold them)" in out
    assert '"text": "f2"' in out
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "notes", "--json"]) == 0
    arguments = json.loads(capsys.readouterr().out)["arguments"]
    assert arguments == {"rendered_from": str(workflow), "args": {"text": "hello"}, "note": None}

    workflow.write_text(workflow.read_text().replace('args: {text: "${{ item }}"}', 'args: {text: "v2 ${{ item }}"}'))
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "f2"]) == 0
    out = capsys.readouterr().out
    assert "arguments not shown: step 'convert' of" in out and "its arguments may differ from those sent" in out
    assert '"text": "' not in out.split("arguments not shown")[1].split("result")[0]
    assert "v2" not in out
    workflow.unlink()
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "f2"]) == 0
    assert f"arguments not shown: the workflow file {workflow} is not there now" in capsys.readouterr().out


def test_show_item_masks_the_arguments_it_renders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment variable the arguments read is rendered with its value now, and printed masked; a secret
    input renders as the placeholder the journal holds."""
    monkeypatch.setenv("REPORT_TOKEN", "tok-9f8e7d6c5b")
    text = WORKFLOW.replace(
        'args: {text: "hello"}', 'args: {text: "hello ${{ env.REPORT_TOKEN }} ${{ inputs.token }}"}'
    )
    run = write_run_of_file(tmp_path, text)
    assert main(["show", RUN_ID, "--state-dir", str(run.parent.parent), "--item", "notes"]) == 0
    out = capsys.readouterr().out
    assert '"text": "hello ***env.REPORT_TOKEN*** ***inputs.token***"' in out
    assert "tok-9f8e7d6c5b" not in out


def test_show_item_of_an_unknown_key_suggests_one(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_dir = str(run_dir.parent.parent)
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "f33"]) == 2
    assert "no item 'f33' in run " in capsys.readouterr().err
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "3"]) == 2  # a key's last part (a file name)
    assert "no item '3' in run " in (err := capsys.readouterr().err) and err.rstrip().endswith("did you mean 'f3'?")
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--item", "f1", "--step", "notes"]) == 2
    assert "no item 'f1' of step 'notes'" in capsys.readouterr().err
    assert main(["show", RUN_ID, "--state-dir", state_dir, "--step", "notes"]) == 2
    assert "--step goes with --item" in capsys.readouterr().err


def test_a_damaged_journal_is_reported_up_to_the_damage_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path)
    journal = run / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:20]) + "not json\n" + "".join(lines[20:]))
    out = tmp_path / "junit.xml"
    assert main(["report", RUN_ID, "--state-dir", str(tmp_path), "--junit", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"run {RUN_ID}: damaged; wrote" in err and "journal.jsonl:21: not JSON" in err, err
    assert ET.parse(out).getroot().tag == "testsuites"  # what comes before the damage


def test_calls_a_killed_attempt_left_unanswered_end_with_it_and_a_reconciled_one_says_so() -> None:
    """kill -9 with three calls in flight, a resume 100 s later whose reconcile tool says one happened (done) and
    one did not (called again): the unanswered calls are drawn up to the killed attempt's last record (not across
    the 100 s it was down), the one said done as reconciled, the one called again in doubt, then its call."""

    def at(second: float) -> str:
        return f"2026-12-01T00:{int(second) // 60:02d}:{second % 60:06.3f}Z"

    def sent(key: str, second: float) -> dict[str, object]:
        return {"type": "item_dispatched", "step": "each", "item": key, "ts": at(second)}

    journal = entries(
        [
            {"type": "run_started", "ts": at(0)},
            {"type": "step_started", "step": "each", "ts": at(0)},
            sent("a", 1), sent("b", 1), sent("c", 1), sent("d", 1),
            {"type": "item_succeeded", "step": "each", "item": "a", "ts": at(2)},
            {"type": "item_succeeded", "step": "each", "item": "d", "ts": at(3)},  # the killed attempt's last
            {"type": "run_resumed", "ts": at(103)},
            {"type": "item_reconciled", "step": "each", "item": "b", "verdict": "done", "ts": at(104)},
            {"type": "item_reconciled", "step": "each", "item": "c", "verdict": "not-done", "ts": at(104)},
            sent("c", 105),
            {"type": "item_succeeded", "step": "each", "item": "c", "ts": at(106)},
        ]
    )  # fmt: skip
    (lane,) = build(journal).lanes
    totals = lane.totals
    assert (lane.calls, totals.succeeded, totals.reconciled, totals.in_doubt) == (5, 3, 1, 1)
    # Calls in flight: a for 1 s, d for 2 s, b and c for 2 s each until the kill (not 102 s), c again for 1 s.
    assert sum(b.busy for b in lane.buckets) == pytest.approx(8.0)
    bucket_s = 106 / len(lane.buckets)
    ends = {o: [i for i, b in enumerate(lane.buckets) if getattr(b, o)] for o in ("reconciled", "in_doubt")}
    assert ends == {"reconciled": [int(3 / bucket_s)], "in_doubt": [int(3 / bucket_s)]}  # at the kill
