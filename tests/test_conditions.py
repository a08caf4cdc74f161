"""Status functions in ``if:`` (``success()``, ``failure()``, ``always()``) and skipped dependencies, run by the
scheduler on fake servers (virtual clock).

The rules follow GitHub Actions' documentation ("Status check functions" in *Evaluate expressions in
workflows and actions*, and ``jobs.<job_id>.needs`` / ``jobs.<job_id>.if`` in *Workflow syntax*):

- "A default status check of ``success()`` is applied unless you include one of these functions": an
  ``if:`` that calls none is read as ``success() && (if)``; one that calls any (``!failure()`` too) is not.
- ``success()``: "Returns true when none of the previous steps have failed or been canceled"; for jobs, "If a
  job fails or is skipped, all jobs that need it are skipped unless the jobs use a conditional expression
  that causes the job to continue." Here: every dependency succeeded (a skipped one does not count as
  succeeded, so by default a skip travels down the chain), and no step of the run has failed.
- ``failure()``: "Returns true when any previous step of a job fails. If you have a chain of dependent jobs,
  ``failure()`` returns true if any ancestor job fails." Here: some step this one depends on, directly or
  through other steps, failed.
- ``always()``: "Causes the step to always execute, and returns true, even when canceled."

Where mcp-run differs, on purpose (docs/format.md says so too):

- No ``cancelled()``: an interrupt (SIGINT/SIGTERM) never starts a step, ``always()`` ones included, so
  ``always()`` plays the part of GitHub's recommended ``!cancelled()``.
- A dependency without a definite outcome (calls in doubt, a server unreachable) holds its dependents back
  whatever their ``if:``: the run stays open and a resume decides.
- ``success()`` reads a step's own dependencies: a step after an ``always()`` step that succeeded runs even
  if something further up was skipped (GitHub's job-level check looks at every ancestor there, which its
  users report as a bug: actions/runner#2205).
- A skipped step never fails the run, and its dependents are *skipped*, never *failed*.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from runner.cli.report import render_summary
from runner.engine.core.outcome import Outcome, summary
from runner.engine.core.vocabulary import SkipCause
from runner.exitcodes import ExitCode
from runner.view.text import skip_label
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.harness import Harness, Resume, echo_tools, plan_of, run_plan

FORMAT_DOC = Path(__file__).parents[1] / "docs" / "format.md"

# The table docs/format.md shows, as it shows it: how a step `t` that needs `dep` ends, for each way `dep` ended
# (rows) and each `if:` of `t` (columns): `runs`, or `skipped (<why>)` as the summary words it.
TABLE = "\n".join([
    "| `dep` ended | no `if` | `success()` | `failure()` | `always()` | `always() && inputs.cleanup` |",
    "|---|---|---|---|---|---|",
    "| succeeded | runs | runs | skipped (if false) | runs | skipped (if false) |",
    "| failed | skipped (after a failure) | skipped (if false) | runs | runs | skipped (if false) |",
    "| skipped by its `if` | skipped (dependency skipped) | skipped (if false) | skipped (if false) | runs "
    "| skipped (if false) |",
    "| skipped after a failure | skipped (after a failure) | skipped (if false) | runs | runs | skipped (if false) |",
])  # fmt: skip

# How `dep` comes to end each way (`root` fails in the last row, and `dep` needs it).
DEPENDENCY = {
    "succeeded": "  dep: {server: s, tool: echo, args: {text: d}}",
    "failed": "  dep: {server: s, tool: fail, args: {text: d}}",
    "skipped by its `if`": "  dep: {server: s, tool: echo, if: false, args: {text: d}}",
    "skipped after a failure": (
        "  root: {server: s, tool: fail, args: {text: r}}\n"
        "  dep: {server: s, tool: echo, needs: [root], args: {text: d}}"
    ),
}
# Whether the run fails: only when something failed, never because something was skipped.
RUN_FAILS = {
    "succeeded": False,
    "failed": True,
    "skipped by its `if`": False,
    "skipped after a failure": True,
}


def sent(harness: Harness, argument: str, server: str = "s") -> list[Any]:
    """One argument of every call the fake server received, in order."""
    return [c.params["arguments"][argument] for c in harness.calls(server)]


def _table() -> list[tuple[str, str, str]]:
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in TABLE.strip().splitlines()]
    header, _, *body = rows
    conditions = [c[1:-1] if c.startswith("`") and c.endswith("`") else c for c in header]
    return [(row[0], conditions[n], row[n]) for row in body for n in range(1, len(row))]


CASES = _table()


def _workflow(dependency: str, condition: str) -> str:
    when = "" if condition == "no `if`" else f"    if: ${{{{ {condition} }}}}\n"
    return f"""
version: 1
servers:
  s: {{command: [fake]}}
inputs:
  cleanup: {{type: boolean, default: false}}
steps:
{DEPENDENCY[dependency]}
  t:
    server: s
    tool: echo
    needs: [dep]
{when}    args: {{text: t}}
"""


def test_the_table_covers_every_case_and_is_the_docs() -> None:
    assert len(CASES) == 4 * 5
    assert {c[0] for c in CASES} == set(DEPENDENCY)
    assert TABLE.strip() in FORMAT_DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize(("dependency", "condition", "expected"), CASES, ids=[f"{d}-{c}" for d, c, _ in CASES])
async def test_status_functions_table(
    autojump_clock: trio.abc.Clock, dependency: str, condition: str, expected: str
) -> None:
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(_workflow(dependency, condition)), harness)
    t = outcome.steps["t"]
    called = sent(harness, "text")
    if expected == "runs":
        assert (t.status, t.cause) == ("succeeded", None)
        assert "t" in called
    else:
        assert t.status == "skipped" and expected == f"skipped ({skip_label(t.cause)})"
        assert "t" not in called
    assert outcome.status == ("failed" if RUN_FAILS[dependency] else "succeeded")
    assert outcome.exit_code == (ExitCode.FAILED if RUN_FAILS[dependency] else ExitCode.OK)


# -- drop (if reset) -> create -> insert ----------------------------------------------------------------------

TABLES = """
version: 1
servers:
  db: {command: [fake-sqlite]}
inputs:
  reset: {type: boolean, default: false}
steps:
  drop:
    server: db
    tool: query
    if: ${{ inputs.reset }}
    args: {sql: DROP TABLE notes}
  create:
    server: db
    tool: query
    needs: [drop]
    IF_CREATE
    args: {sql: CREATE TABLE IF NOT EXISTS notes (text)}
  insert:
    server: db
    tool: query
    for_each: ["a", "b"]
    needs: [create]
    args: {sql: "INSERT INTO notes VALUES ('${{ item }}')"}
"""


def _sqlite(fail_drop: bool) -> Any:
    def setup(server: FakeServer) -> None:
        async def query(call: FakeCall) -> dict[str, Any]:
            sql = str(call.arguments["sql"])
            if fail_drop and sql.startswith("DROP"):
                return text_result("no such table: notes", is_error=True)
            return text_result("ok")

        server.tools["query"] = query

    return setup


def _text_summary(outcome: Outcome) -> str:
    """The text summary, its first line cut before the calls count (``; 3/3 calls done in 0.0s``)."""
    assert outcome.plan is not None
    first, *rest = render_summary(summary(outcome.plan, outcome, run_id=None, duration=0.0)).splitlines()
    return "\n".join([first.split("; ")[0], *rest])


async def test_optional_first_step_then_the_rest_runs(autojump_clock: trio.abc.Clock) -> None:
    # `!failure()` overrides the implicit success(): create runs after drop succeeded or was skipped, not
    # after drop failed; insert, after create, needs nothing more.
    plan = plan_of(TABLES.replace("IF_CREATE", "if: ${{ !failure() }}"))
    harness = Harness({"db": _sqlite(fail_drop=False)})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan, harness, events=events)
    assert [sql[:6] for sql in sent(harness, "sql", "db")] == ["CREATE", "INSERT", "INSERT"]
    assert {sid: s.status for sid, s in outcome.steps.items()} == {
        "drop": "skipped",
        "create": "succeeded",
        "insert": "succeeded",
    }
    assert (outcome.status, outcome.exit_code) == ("succeeded", ExitCode.OK)
    skipped = [e for e in events if e["type"] == "step_skipped"]
    assert skipped == [{**skipped[0], "step": "drop", "reason": "its `if` condition is false", "cause": "if-false"}]
    assert _text_summary(outcome).splitlines()[0] == ("succeeded: 3 steps (2 succeeded, 1 skipped: if false)")

    # With reset, all three run, in order.
    harness = Harness({"db": _sqlite(fail_drop=False)})
    outcome = await run_plan(plan_of(TABLES.replace("IF_CREATE", "if: ${{ !failure() }}"), reset="true"), harness)
    assert [sql[:6] for sql in sent(harness, "sql", "db")] == ["DROP T", "CREATE", "INSERT", "INSERT"]
    assert outcome.status == "succeeded"


async def test_optional_first_step_without_a_status_function_skips_the_chain(autojump_clock: trio.abc.Clock) -> None:
    # As in GitHub Actions: without a status function a skipped dependency skips its dependents, down the chain;
    # nothing failed, so the run succeeds, and the summary says why each step was skipped.
    harness = Harness({"db": _sqlite(fail_drop=False)})
    events: list[dict[str, Any]] = []
    outcome = await run_plan(plan_of(TABLES.replace("IF_CREATE", "")), harness, events=events)
    assert harness.calls("db") == []
    assert [(e["step"], e["reason"], e["cause"]) for e in events if e["type"] == "step_skipped"] == [
        ("drop", "its `if` condition is false", "if-false"),
        ("create", "dependency 'drop' was skipped", "dependency-skipped"),
        ("insert", "dependency 'create' was skipped", "dependency-skipped"),
    ]
    assert (outcome.status, outcome.exit_code) == ("succeeded", ExitCode.OK)
    assert _text_summary(outcome).splitlines()[0] == (
        "succeeded: 3 steps (3 skipped: 2 dependency skipped, 1 if false)"
    )


async def test_a_failed_optional_step_fails_the_run_and_says_why_the_rest_was_skipped(
    autojump_clock: trio.abc.Clock,
) -> None:
    harness = Harness({"db": _sqlite(fail_drop=True)})
    events: list[dict[str, Any]] = []
    plan = plan_of(TABLES.replace("IF_CREATE", "if: ${{ !failure() }}"), reset="true")
    outcome = await run_plan(plan, harness, events=events)
    assert [sql[:6] for sql in sent(harness, "sql", "db")] == ["DROP T"]
    assert [(e["step"], e["reason"], e["cause"]) for e in events if e["type"] == "step_skipped"] == [
        ("create", "its `if` condition is false", "if-false"),
        ("insert", "dependency 'create' was skipped, after 'drop' failed", "failure"),
    ]
    assert (outcome.status, outcome.exit_code) == ("failed", ExitCode.FAILED)
    first, *rest = _text_summary(outcome).splitlines()
    assert first == "failed: 3 steps (1 failed, 2 skipped: 1 if false, 1 after a failure)"
    [failure] = rest  # the failure, whatever words its kind is shown in
    assert failure.startswith("  failed drop: ") and failure.endswith(": no such table: notes")


# -- cleanup with always(), failure() across a chain, interrupts and resumes ----------------------------------

CLEANUP = """
version: 1
servers:
  s: {command: [fake]}
inputs:
  cleanup: {type: boolean, default: true}
steps:
  work:
    server: s
    tool: TOOL
    args: {text: work}
  cleanup:
    server: s
    tool: echo
    needs: [work]
    if: ${{ always() && inputs.cleanup }}
    args: {text: "cleanup after ${{ steps.work.status }}"}
  notify:
    server: s
    tool: echo
    needs: [cleanup]
    if: ${{ failure() }}
    args: {text: notify}
  report:
    server: s
    tool: echo
    needs: [cleanup]
    args: {text: report}
"""


async def test_always_cleans_up_and_failure_sees_a_failure_further_up(autojump_clock: trio.abc.Clock) -> None:
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(CLEANUP.replace("TOOL", "fail")), harness)
    assert sent(harness, "text") == ["work", "cleanup after failed", "notify"]
    # report: its dependency (cleanup) succeeded, but a step failed, and no new step starts after a failure
    # unless its if says so.
    assert (outcome.steps["report"].status, outcome.steps["report"].reason) == ("skipped", "step 'work' failed")
    assert outcome.steps["report"].cause is SkipCause.FAILURE
    assert (outcome.status, outcome.exit_code) == ("failed", ExitCode.FAILED)

    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(CLEANUP.replace("TOOL", "echo")), harness)
    assert sent(harness, "text") == ["work", "cleanup after succeeded", "report"]
    assert outcome.steps["notify"].reason == (
        "its `if` condition is false (failure() is false: nothing it depends on failed)"
    )
    assert outcome.status == "succeeded"

    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(CLEANUP.replace("TOOL", "fail"), cleanup="false"), harness)
    assert sent(harness, "text") == ["work", "notify"]  # failure() is transitive
    assert outcome.steps["cleanup"].cause is SkipCause.CONDITION


async def test_an_explicit_success_that_is_false_says_why(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  a: {server: s, tool: fail, args: {text: a}}
  b:
    server: s
    tool: echo
    needs: [a]
    if: ${{ success() || failure() && `false` }}
    args: {text: b}
"""
    outcome = await run_plan(plan_of(text), Harness({"s": echo_tools}))
    assert outcome.steps["b"].reason == "its `if` condition is false (success() is false: dependency 'a' failed)"


async def test_an_interrupt_starts_no_step_even_with_always(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  slow: {server: s, tool: slow, args: {seconds: 10}}
  cleanup:
    server: s
    tool: echo
    needs: [slow]
    if: ${{ always() }}
    args: {text: cleanup}
"""

    async def interrupt(scheduler: Any) -> None:
        await trio.sleep(5)
        scheduler.drain()

    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan_of(text), harness, control=interrupt)
    assert [c.params["name"] for c in harness.calls("s")] == ["slow"]
    assert outcome.steps["cleanup"].status == "skipped"
    assert outcome.steps["cleanup"].cause is SkipCause.UNFINISHED
    assert outcome.status == "interrupted"


async def test_always_waits_for_a_dependency_in_doubt_and_a_resume_decides(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  work: {server: s, tool: echo, args: {text: work}}
  cleanup:
    server: s
    tool: echo
    needs: [work]
    if: ${{ always() }}
    args: {text: cleanup}
  notify:
    server: s
    tool: echo
    needs: [cleanup]
    if: ${{ failure() }}
    args: {text: notify}
"""
    plan = plan_of(text)
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": echo_tools}), events=events)
    dispatched = next(i for i, e in enumerate(events) if e["type"] == "item_dispatched")
    cut = events[: dispatched + 1]  # `work` was sent; its answer never recorded

    # A resume that skips it: `work` failed (its call skipped in doubt), so cleanup runs, and notify too.
    harness = Harness({"s": echo_tools})
    journal: list[dict[str, Any]] = []
    outcome = await run_plan(plan, harness, prior=Resume(events=cut, in_doubt="skip"), events=journal)
    assert sent(harness, "text") == ["cleanup", "notify"]
    assert outcome.status == "failed"

    # With the decision still open the run stops before anything runs (as without status functions).
    harness = Harness({"s": echo_tools})
    outcome = await run_plan(plan, harness, prior=Resume(events=cut))
    assert outcome.blocked and harness.calls("s") == []


@pytest.mark.parametrize(("lenient", "condition"), [("false", "${{ always() }}"), ("true", "${{ success() }}")])
async def test_a_dependency_in_doubt_holds_back_always(
    autojump_clock: trio.abc.Clock, lenient: str, condition: str
) -> None:
    """Even a continue_on_error dependency: what its dependents would read is not known until a resume."""
    text = f"""
version: 1
servers:
  s: {{command: [fake]}}
steps:
  work: {{server: s, tool: lost, args: {{text: work}}, continue_on_error: {lenient}}}
  cleanup:
    server: s
    tool: echo
    needs: [work]
    if: {condition}
    args: {{text: cleanup}}
"""

    def setup(server: FakeServer) -> None:
        echo_tools(server)

        async def lost(call: FakeCall) -> dict[str, Any]:
            await trio.sleep(3600)  # longer than the idle timeout: the call ends in doubt
            return text_result("late")

        server.tools["lost"] = lost

    harness = Harness({"s": setup})
    outcome = await run_plan(plan_of(text), harness)
    assert outcome.status == "in-doubt"
    assert [c.params["name"] for c in harness.calls("s")] == ["lost"]
    assert (outcome.steps["cleanup"].reason, outcome.steps["cleanup"].cause) == (
        "dependency 'work' has calls in doubt",
        SkipCause.UNFINISHED,
    )


async def test_skips_after_calls_skipped_in_doubt_say_so(autojump_clock: trio.abc.Clock) -> None:
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  work: {server: s, tool: echo, args: {text: work}}
  after: {server: s, tool: echo, needs: [work], args: {text: after}}
"""
    plan = plan_of(text)
    events: list[dict[str, Any]] = []
    await run_plan(plan, Harness({"s": echo_tools}), events=events)
    cut = events[: next(i for i, e in enumerate(events) if e["type"] == "item_dispatched") + 1]
    outcome = await run_plan(plan, Harness({"s": echo_tools}), prior=Resume(events=cut, in_doubt="skip"))
    assert (outcome.steps["after"].reason, outcome.steps["after"].cause) == (
        "dependency 'work' failed: calls skipped in doubt (--skip-in-doubt)",
        SkipCause.FAILURE,
    )


async def test_a_resume_makes_the_same_decisions(autojump_clock: trio.abc.Clock) -> None:
    # Interrupted after `work` failed and `cleanup` (always) ran: the resume calls nothing again that
    # succeeded, runs `work` again (a definite failure is re-attempted), and decides the rest the same way.
    plan = plan_of(CLEANUP.replace("TOOL", "fail"))
    events: list[dict[str, Any]] = []
    first = await run_plan(plan, Harness({"s": echo_tools}), events=events)
    cleanup_done = next(i for i, e in enumerate(events) if e["type"] == "step_finished" and e["step"] == "cleanup")
    harness = Harness({"s": echo_tools})
    resumed_events: list[dict[str, Any]] = []
    outcome = await run_plan(plan, harness, prior=Resume(events=events[: cleanup_done + 1]), events=resumed_events)
    assert sent(harness, "text") == ["work", "notify"]  # cleanup reused
    assert outcome.steps["cleanup"].reused == 1
    assert {sid: (s.status, s.cause) for sid, s in outcome.steps.items()} == {
        sid: (s.status, s.cause) for sid, s in first.steps.items()
    }


async def test_a_retry_that_succeeds_no_longer_counts_what_a_failure_step_left(autojump_clock: trio.abc.Clock) -> None:
    # First attempt: `work` fails, so `notify` (failure()) runs, and fails too. A --retry-failed where `work`
    # succeeds skips `notify`: its earlier failure no longer says how the run ends.
    text = """
version: 1
servers:
  s: {command: [fake]}
steps:
  work: {server: s, tool: flaky, args: {text: work}}
  notify:
    server: s
    tool: fail
    needs: [work]
    if: ${{ failure() }}
    args: {text: notify}
"""

    def flaky(works: bool) -> Any:
        def setup(server: FakeServer) -> None:
            echo_tools(server)
            server.tools["flaky"] = server.tools["echo" if works else "fail"]

        return setup

    plan = plan_of(text)
    events: list[dict[str, Any]] = []
    first = await run_plan(plan, Harness({"s": flaky(works=False)}), events=events)
    assert [f["step"] for f in first.failures] == ["work", "notify"]
    harness = Harness({"s": flaky(works=True)})
    outcome = await run_plan(plan, harness, prior=Resume(events=events))
    assert sent(harness, "text") == ["work"]
    assert (outcome.steps["notify"].status, outcome.steps["notify"].cause) == ("skipped", SkipCause.CONDITION)
    assert (outcome.status, outcome.exit_code, outcome.failures) == ("succeeded", ExitCode.OK, [])


def test_the_summary_counts_steps_by_status_and_skips_by_cause() -> None:
    def step(status: str, cause: str | None = None, total: int = 1) -> dict[str, Any]:
        done = total if status == "succeeded" else 0
        entry = {"status": status, "total": total, "succeeded": done, "failed": 0, "in_doubt": 0, "skipped": 0}
        return {**entry, "reused": 0, **({"cause": cause} if cause else {})}

    def first_line(*steps: dict[str, Any]) -> str:
        summary = {"status": "x", "duration_s": 1.0, "failed": [], "steps": {f"s{n}": s for n, s in enumerate(steps)}}
        return render_summary(summary).splitlines()[0].split("; ")[0]

    assert first_line(step("succeeded"), step("succeeded"), step("skipped", "if-false", 0)) == (
        "x: 3 steps (2 succeeded, 1 skipped: if false)"
    )
    assert (
        first_line(
            step("skipped", "failure", 0),
            step("failed"),
            step("skipped", "unfinished", 0),
            step("skipped", "failure", 0),
        )
        == "x: 4 steps (1 failed, 3 skipped: 2 after a failure, 1 left for a resume)"
    )
    # A journal of an earlier version does not say why: the skips are counted, not explained.
    assert first_line(step("skipped", None, 0), step("skipped", "dependency-skipped", 0)) == (
        "x: 2 steps (2 skipped: 1 dependency skipped)"
    )
    assert first_line(step("skipped", None, 0)) == "x: 1 step (1 skipped)"
