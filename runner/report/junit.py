"""A run as JUnit XML, for the test dashboards of CI systems: one ``<testsuite>`` per step, one
``<testcase>`` per item (and one for a step of a single call, or a step that failed or was skipped as a whole).

A failed item, one skipped in doubt and one in doubt are each a ``<failure>`` whose ``message`` is its error
(an item in doubt: that the server may or may not have run it); an item not run, or a step skipped, is
``<skipped>``. Text that XML 1.0 cannot hold (control characters) is replaced, so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Final

from runner.report.model import ItemRow, RunReportModel, StepRow

__all__ = ["junit_xml"]

_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
MESSAGE_LIMIT: Final = 1000  # the message attribute; the element's text holds the whole error


def _text(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def _seconds(value: float | None) -> str:
    return f"{value or 0.0:.3f}"


def junit_xml(report: RunReportModel) -> str:
    """The JUnit XML of ``report`` (UTF-8, with its declaration)."""
    by_step: dict[str, list[ItemRow]] = {}
    for item in report.items:
        by_step.setdefault(item.step, []).append(item)
    root = ET.Element("testsuites", name=_text(f"mcp-run {report.workflow or report.run_id or ''}".strip()))
    tests = failures = skipped = 0
    for step in report.steps:
        suite = _suite(report, step, by_step.get(step.id, []))
        root.append(suite)
        tests += int(suite.get("tests", "0"))
        failures += int(suite.get("failures", "0"))
        skipped += int(suite.get("skipped", "0"))
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", "0")
    root.set("skipped", str(skipped))
    root.set("time", _seconds(report.duration_s))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(report: RunReportModel, step: StepRow, items: list[ItemRow]) -> ET.Element:
    suite = ET.Element("testsuite", name=_text(step.id))
    if report.started_at:
        suite.set("timestamp", _text(report.started_at.removesuffix("Z")))
    cases = list(_cases(report, step, items))
    suite.extend(cases)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", "0")
    suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    suite.set("time", _seconds(step.duration_s))
    return suite


def _cases(report: RunReportModel, step: StepRow, items: list[ItemRow]) -> Iterable[ET.Element]:
    classname = _text(f"{_workflow_name(report)}.{step.id}")
    if step.kind is not None and step.reason:  # failed as a whole
        case = ET.Element("testcase", classname=classname, name=_text(step.id), time=_seconds(step.duration_s))
        _failure(case, step.kind, step.reason)
        yield case
        return
    if not items:
        case = ET.Element("testcase", classname=classname, name=_text(step.id), time="0.000")
        if step.status != "succeeded":
            ET.SubElement(case, "skipped", message=_text(step.reason or f"step {step.status}"))
        yield case
        return
    for item in items:
        name = item.key if step.fan_out else step.id
        case = ET.Element("testcase", classname=classname, name=_text(name), time=_seconds(item.duration_s))
        if item.failed:
            _failure(case, item.kind, item.error or "failed")
        elif item.status == "in-doubt":
            error = item.error or "dispatched; no result recorded"
            _failure(case, item.kind or "outcome-unknown", f"in doubt: the server may or may not have run it: {error}")
        elif item.status in ("running", "pending"):
            ET.SubElement(case, "skipped", message=item.status)
        yield case


def _failure(case: ET.Element, kind: str | None, error: str) -> None:
    message = error.strip().split("\n", 1)[0]
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    failure = ET.SubElement(case, "failure", message=_text(message), type=_text(kind or "failed"))
    failure.text = _text(error)


def _workflow_name(report: RunReportModel) -> str:
    name = (report.workflow or "mcp-run").replace("\\", "/").rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name
