"""Journals that lie: every field of every event type given a value of the wrong type, and lines torn at any
offset. ``runs``, ``show``, ``logs`` and a resume never raise: a line that is not an event is named by file
and line, ``runs`` lists the run as damaged (exit 0, and goes on to the others), ``show`` and ``logs`` print
what comes before it and exit 2, and a resume refuses (exit 2) without calling anything.

Which replacements are wrong is decided by the journal's JSON Schema (``schemas/journal-event.schema.json``,
checked by ``jsonschema``), not by the reader under test.
"""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner import cli
from runner.cli import main
from runner.engine.core.events import JOURNAL_FORMAT, AnyEvent, encode
from runner.schemas import JOURNAL_SCHEMA_PATH
from tests.support import entry

CLASSES = typing.get_args(AnyEvent)
_SCHEMA = json.loads(JOURNAL_SCHEMA_PATH.read_text())
SCHEMA = jsonschema.Draft202012Validator(_SCHEMA)
BY_TYPE = {
    kind: jsonschema.Draft202012Validator({"$defs": _SCHEMA["$defs"], "$ref": ref})
    for kind, ref in _SCHEMA["discriminator"]["mapping"].items()
}
"""The schema's own discriminator: an object whose ``type`` names an event is valid when that event's schema
takes it (what the ``oneOf`` decides, without trying the other 22 first); any other ``type`` goes to the whole."""


def schema_valid(obj: dict[str, Any]) -> bool:
    kind = obj.get("type")
    validator = BY_TYPE.get(kind) if isinstance(kind, str) else None
    return (validator or SCHEMA).is_valid(obj)


RUN_ID = "20260101T000000.000000Z-fuzzed"
WORKFLOW = "wf.yaml"
WRONG: list[Any] = [None, [1, 2], {"a": [1]}, -1, 1.5, "x", "x" * 200_000]
"""Values put in place of a field: of every JSON type, a negative number, and a string of 200,000 characters."""


@pytest.fixture(autouse=True, scope="module")
def one_parser() -> Iterator[None]:
    """``main`` builds its argparse parser once (not 5,000 times, which was most of this module's time): the
    commands' options are the same, only what argparse parses from them is under test here."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "build_parser", functools.cache(cli.build_parser))
        yield


def sample(cls: Any) -> dict[str, Any]:
    """A valid journal object of event class ``cls`` (with a step and an item where it has them)."""
    names = {f.name for f in fields(cls)}
    kind = cls.__dataclass_fields__["type"].default
    extra = {name: value for name, value in (("step", "each"), ("item", "k1")) if name in names}
    return encode(entry({"type": kind, **extra}, seq=3))


def fuzz_cases() -> list[tuple[str, str]]:
    """(event type, field): every field of every event, and the three every line has."""
    cases = []
    for cls in CLASSES:
        kind = cls.__dataclass_fields__["type"].default
        cases += [(kind, "seq"), (kind, "ts")] + [(kind, f.name) for f in fields(cls)]
    return cases


def write_run(tmp_path: Path, mutated: dict[str, Any] | bytes) -> tuple[Path, Path, int]:
    """A workflow and a state directory holding one open run of it whose journal has ``mutated`` as its
    first line (a ``run_started``) or its third. Its workflow hash is stale, so a resume that reads the
    journal refuses as changed (exit 2) rather than call anything. Returns (workflow, state dir, line)."""
    workflow = tmp_path / WORKFLOW
    workflow.write_text(
        "version: 1\nservers:\n  s:\n    command: [mcp-run-no-such-program]\n"
        "steps:\n  each:\n    server: s\n    tool: t\n"
    )
    started = encode(entry({"type": "run_started", "run_id": RUN_ID, "workflow": str(workflow.resolve())}))
    lines: list[bytes] = [_line(started), _line(encode(entry({"type": "step_started", "step": "each"}, seq=2)))]
    bad = mutated if isinstance(mutated, bytes) else _line(mutated)
    if isinstance(mutated, dict) and mutated.get("type") == "run_started":
        lines[0], at = bad, 1
    else:
        lines.append(bad)
        at = 3
    lines.append(_line(encode(entry({"type": "item_dispatched", "step": "each", "item": "k2"}, seq=4))))
    run = tmp_path / "state" / "runs" / RUN_ID
    run.mkdir(parents=True)
    (run / "journal.jsonl").write_bytes(b"".join(lines))
    return workflow, tmp_path / "state", at


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def commands(capsys: pytest.CaptureFixture[str], workflow: Path, state: Path) -> dict[str, tuple[int, str, str]]:
    """``runs --json``, ``show``, ``logs`` and ``resume WORKFLOW`` in this process: (exit code, stdout, stderr)
    of each. An exception escaping ``main`` fails the test with its traceback."""
    out = {}
    for name, argv in (
        ("runs", ["runs", "--state-dir", str(state), "--json"]),
        ("show", ["show", RUN_ID, "--state-dir", str(state)]),
        ("logs", ["logs", RUN_ID, "--state-dir", str(state)]),
        ("resume", ["resume", str(workflow), "--state-dir", str(state)]),
    ):
        code = main(argv)
        stdout, stderr = capsys.readouterr()
        out[name] = (code, stdout, stderr)
    return out


def check(results: dict[str, tuple[int, str, str]], *, damaged: bool, line: int, journal: Path) -> None:
    where = f"{journal}:{line}:"
    runs_code, runs_out, _ = results["runs"]
    assert runs_code == 0
    (listed,) = json.loads(runs_out)["runs"]
    for name in ("show", "logs"):
        code, _, err = results[name]
        assert (code, where in err) == ((2, True) if damaged else (0, False)), (name, err[-500:])
    resume_code, _, resume_err = results["resume"]
    assert resume_code == 2  # refused: damaged, or (a journal that reads) changed since it started
    assert "Traceback" not in resume_err
    if damaged:
        assert listed["status"] == "damaged"
        assert listed["damaged"]["line"] == line and listed["damaged"]["file"] == str(journal)
        assert where in resume_err and "cannot be" in resume_err
        assert "mv " in resume_err  # the way out: move the run aside
    else:
        assert listed["status"] != "damaged" and "damaged" not in resume_err


@pytest.mark.parametrize(("kind", "name"), fuzz_cases(), ids=[f"{k}.{n}" for k, n in fuzz_cases()])
def test_a_field_of_the_wrong_type_is_named_by_line_everywhere(
    kind: str, name: str, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    cls = next(c for c in CLASSES if c.__dataclass_fields__["type"].default == kind)
    for value in WRONG:
        tmp_path = tmp_path_factory.mktemp("fuzz")
        own = {"run_id": RUN_ID, "workflow": str((tmp_path / WORKFLOW).resolve())} if kind == "run_started" else {}
        obj = {**sample(cls), **own, name: value}
        workflow, state, line = write_run(tmp_path, obj)
        if kind == "run_started" and name == "workflow" and isinstance(value, str):
            continue  # a run of another workflow: not this one's to resume (runs and show read it fine)
        valid = schema_valid(obj) and (line > 1 or obj.get("type") == "run_started")
        if name == "journal" and isinstance(value, int) and value > JOURNAL_FORMAT:
            valid = False  # a format this version cannot read: refused by name, at its line
        journal = state / "runs" / RUN_ID / "journal.jsonl"
        check(commands(capsys, workflow, state), damaged=not valid, line=line, journal=journal)


def test_every_event_type_is_fuzzed() -> None:
    kinds = {kind for kind, _ in fuzz_cases()}
    assert kinds == {c.__dataclass_fields__["type"].default for c in CLASSES} and len(kinds) == 23
    for cls in CLASSES:  # the samples themselves are valid events
        assert SCHEMA.is_valid(sample(cls)), cls


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_line_torn_anywhere_is_named_a_torn_tail_is_not(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """Line 1, 2 or 3 of a journal cut short at any offset: with the rest of the journal after it (glued on,
    or on the next line), it is damage at that line; at the end of the file (a crash mid-write), it is
    ignored."""
    tmp_path = tmp_path_factory.mktemp("torn")
    workflow, state, _ = write_run(tmp_path, encode(entry({"type": "item_succeeded", "step": "each", "item": "k1"})))
    journal = state / "runs" / RUN_ID / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    index = data.draw(st.integers(0, len(lines) - 1), label="line")
    # Keeps a byte, loses the "}" (drawn apart from the line's length, which depends on the test's folder).
    cut = 1 + data.draw(st.integers(0, 10**6), label="offset") % (len(lines[index]) - 2)
    how = data.draw(st.sampled_from(["glued", "newline", "tail"]), label="how")
    if how == "tail":
        journal.write_bytes(b"".join(lines[:index]) + lines[index][:cut])
    else:
        rest = b"".join(lines[index + 1 :])
        journal.write_bytes(b"".join(lines[:index]) + lines[index][:cut] + (b"\n" if how == "newline" else b"") + rest)
    results = commands(capsys, workflow, state)
    if how == "tail" or (how == "glued" and index == len(lines) - 1):
        for name in ("runs", "show", "logs"):
            assert results[name][0] == 0, (name, results[name][2])
        assert "damaged" not in results["runs"][1]
    else:
        check(results, damaged=True, line=index + 1, journal=journal)
