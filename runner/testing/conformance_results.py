"""Judging the MCP conformance suite's results: ``python -m runner.testing.conformance_results``.

scripts/conformance.sh runs every client scenario of a group (a protocol revision, ``extensions``, or
``earlier``: older revisions' scenarios neither revision lists) one by one with ``-o DIR`` and records, per
scenario, a line ``NAME<TAB>SCORED<TAB>EXIT<TAB>DIR`` in ``RESULTS/GROUP/runs.tsv`` (SCORED is 1 when the
revision's frozen ``--requirements`` set counts it). This module reads those lines and the suite's
``checks.json`` files and decides, per scenario:

- **pass**: the suite exited 0, no check is FAILURE or WARNING, and at least one check is SUCCESS;
- **fail**, with the reason, otherwise. In particular a scenario whose checks were all SKIPPED (or only
  INFO) tested nothing, and counts as a failure, not a pass.

Then it compares each group with its expected-failures file (``tests/conformance/expected-failures-GROUP.yaml``:
``client:`` maps each scenario expected to fail to a one-line reason). A failure not listed, or a pass that
is listed (a stale entry), is unexpected.

    python -m runner.testing.conformance_results check RESULTS EXPECTED_DIR   exit 1 on anything unexpected
    python -m runner.testing.conformance_results scores LABEL=RESULTS ...     the scores side by side
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = [
    "GroupResults",
    "Outcome",
    "check_group",
    "judge_checks",
    "load_expected",
    "load_group",
    "main",
]

#: The order groups are reported in; others follow alphabetically.
GROUP_ORDER: Final = ("2025-11-25", "2026-07-28", "extensions", "earlier")
BAD_STATUSES: Final = ("FAILURE", "WARNING")


class ResultsError(Exception):
    """The results or an expected-failures file cannot be read; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scenario's verdict: ``reason`` is empty when it passed."""

    scenario: str
    scored: bool
    passed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class GroupResults:
    group: str
    outcomes: tuple[Outcome, ...]

    @property
    def scored(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.scored]

    def score(self) -> tuple[int, int]:
        """(passed, total) over the scored scenarios (every scenario when none is marked scored)."""
        counted = self.scored or list(self.outcomes)
        return sum(o.passed for o in counted), len(counted)


def _first_line(text: object, limit: int = 160) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def judge_checks(checks: Sequence[Mapping[str, Any]], exit_code: int) -> str:
    """The reason a scenario failed, or "" when it passed (see the module docstring for the rule)."""
    bad = [c for c in checks if c.get("status") in BAD_STATUSES]
    if bad:
        return _bad_checks(bad)
    if not any(c.get("status") == "SUCCESS" for c in checks):
        skipped = sum(c.get("status") == "SKIPPED" for c in checks)
        return f"tested nothing: no check succeeded ({len(checks)} checks, {skipped} skipped)"
    if exit_code != 0:
        return f"the suite exited {exit_code} (the client failed or timed out)"
    return ""


def _bad_checks(bad: Sequence[Mapping[str, Any]]) -> str:
    """The first failed check, and how many more failed."""
    first = bad[0]
    detail = first.get("errorMessage") or first.get("description") or ""
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"{first.get('status')} {first.get('id', '?')}: {_first_line(detail)}{more}"


def _read_checks(directory: Path) -> list[dict[str, Any]] | None:
    files = sorted(directory.rglob("checks.json"))
    if not files:
        return None
    checks: list[dict[str, Any]] = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ResultsError(f"{file}: not readable as JSON: {exc}") from exc
        if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
            raise ResultsError(f"{file}: expected a JSON list of checks")
        checks.extend(data)
    return checks


def load_group(directory: Path) -> GroupResults:
    """The outcomes recorded in ``directory/runs.tsv`` (one line per scenario run)."""
    runs = directory / "runs.tsv"
    try:
        lines = runs.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ResultsError(f"{runs}: {exc.strerror or exc}") from exc
    outcomes: dict[str, Outcome] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 4 or fields[1] not in ("0", "1") or not fields[2].lstrip("-").isdigit():
            raise ResultsError(f"{runs}:{number}: expected NAME, SCORED (0/1), EXIT, DIR separated by tabs")
        name, scored, code, out = fields[0], fields[1] == "1", int(fields[2]), Path(fields[3])
        checks = _read_checks(out if out.is_absolute() else directory / out)
        if checks is None:
            reason = f"no checks recorded (the suite exited {code} without results)"
        else:
            reason = judge_checks(checks, code)
        outcomes[name] = Outcome(name, scored, not reason, reason)
    ordered = sorted(outcomes.values(), key=lambda o: (o.scenario.startswith("auth/"), o.scenario))
    return GroupResults(directory.name, tuple(ordered))


def load_expected(path: Path) -> dict[str, str]:
    """Scenario -> reason from an expected-failures file; every entry must give a non-empty reason."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ResultsError(f"{path}: not valid YAML: {exc}") from exc
    client = (data or {}).get("client") if isinstance(data, dict) or data is None else None
    if client is None:
        return {}
    if not isinstance(client, dict):
        raise ResultsError(f"{path}: 'client' must map each scenario name to a one-line reason")
    return {name: _reason(path, name, reason) for name, reason in client.items()}


def _reason(path: Path, name: object, reason: object) -> str:
    """An expected failure's reason, stripped; every entry needs one."""
    if not isinstance(name, str) or not isinstance(reason, str) or not reason.strip():
        raise ResultsError(f"{path}: the entry {name!r} needs a one-line reason (a non-empty string)")
    return reason.strip()


def check_group(results: GroupResults, expected: Mapping[str, str], *, complete: bool) -> list[str]:
    """The unexpected findings (empty when the group is as expected). ``complete``: every scenario of the
    group was run, so an entry naming a scenario that did not run is stale too."""
    problems: list[str] = []
    seen = {o.scenario for o in results.outcomes}
    for outcome in results.outcomes:
        if outcome.passed and outcome.scenario in expected:
            problems.append(f"{outcome.scenario}: passed, but is listed as an expected failure: remove its entry")
        elif not outcome.passed and outcome.scenario not in expected:
            problems.append(f"{outcome.scenario}: failed: {outcome.reason}")
    if complete:
        for name in sorted(set(expected) - seen):
            problems.append(f"{name}: listed as an expected failure, but the suite has no such scenario")
    return problems


def _group_key(name: str) -> tuple[int, str]:
    return (GROUP_ORDER.index(name) if name in GROUP_ORDER else len(GROUP_ORDER), name)


def _groups(results: Path) -> list[Path]:
    found = [d for d in results.iterdir() if (d / "runs.tsv").is_file()] if results.is_dir() else []
    return sorted(found, key=lambda d: _group_key(d.name))


def _print_group(results: GroupResults, expected: Mapping[str, str]) -> None:
    passed, total = results.score()
    scope = "required scenarios" if results.scored else "scenarios"
    print(f"== {results.group}: {passed} / {total} {scope} passed")
    for o in results.outcomes:
        mark = "" if o.scored or not results.scored else "  (not scored)"
        print(f"  {_verdict(o, expected)} {o.scenario}{mark}{_why(o, expected)}")


def _verdict(o: Outcome, expected: Mapping[str, str]) -> str:
    """The outcome against the expected failures, padded for the column."""
    if o.passed:
        verdict = "pass" if o.scenario not in expected else "UNEXPECTED PASS"
    else:
        verdict = "expected failure" if o.scenario in expected else "FAIL"
    return f"{verdict:<17}"


def _why(o: Outcome, expected: Mapping[str, str]) -> str:
    """The reason shown: the expected failure's entry, else what failed."""
    if not o.passed and o.scenario in expected:
        return f": {expected[o.scenario]}"
    return f": {o.reason}" if o.reason else ""


def check(results: Path, expected_dir: Path, complete: bool) -> int:
    groups = _groups(results)
    if not groups:
        raise ResultsError(f"{results}: no group of results (no */runs.tsv)")
    unexpected: list[str] = []
    for directory in groups:
        group = load_group(directory)
        expected = load_expected(expected_dir / f"expected-failures-{group.group}.yaml")
        _print_group(group, expected)
        unexpected += [f"{group.group} {p}" for p in check_group(group, expected, complete=complete)]
    if unexpected:
        print("conformance: unexpected results:", file=sys.stderr)
        for line in unexpected:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


def scores(labelled: Iterable[tuple[str, Path]]) -> int:
    columns = [(label, {d.name: load_group(d) for d in _groups(path)}) for label, path in labelled]
    names = sorted({g for _, groups in columns for g in groups}, key=_group_key)
    _print_scores(names, columns)
    for name in names:
        for label, groups in columns:
            failed = _failed(groups.get(name))
            if failed:
                print(f"{name} {label} failed: {', '.join(failed)}")
    return 0


def _print_scores(names: list[str], columns: list[tuple[str, dict[str, GroupResults]]]) -> None:
    """A table: a row per group, a column per labelled results directory."""
    print(f"{'':<14}" + "".join(f"{label:>16}" for label, _ in columns))
    for name in names:
        cells = [_score_cell(groups.get(name)) for _, groups in columns]
        print(f"{name:<14}" + "".join(f"{cell:>16}" for cell in cells))


def _score_cell(group: GroupResults | None) -> str:
    return "-" if group is None else "{} / {}".format(*group.score())


def _failed(group: GroupResults | None) -> list[str]:
    return [o.scenario for o in group.outcomes if not o.passed] if group else []


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = (
        "usage: python -m runner.testing.conformance_results check RESULTS EXPECTED_DIR [--partial]\n"
        "       python -m runner.testing.conformance_results scores LABEL=RESULTS ..."
    )
    try:
        if _is_check(args):
            return check(Path(args[1]), Path(args[2]), complete=args[3:] == [])
        if len(args) >= 2 and args[0] == "scores" and all("=" in a for a in args[1:]):
            return scores((a.split("=", 1)[0], Path(a.split("=", 1)[1])) for a in args[1:])
    except ResultsError as exc:
        print(f"conformance results: {exc}", file=sys.stderr)
        return 1
    print(usage, file=sys.stderr)
    return 2


def _is_check(args: list[str]) -> bool:
    """``check RESULTS EXPECTED_DIR [--partial]``."""
    return len(args) in (3, 4) and args[0] == "check" and args[3:] in ([], ["--partial"])


if __name__ == "__main__":
    sys.exit(main())
