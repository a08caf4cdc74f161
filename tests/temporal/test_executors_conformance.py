"""The two executors agree: each scenario of :data:`tests.temporal.conformance.SCENARIOS` (success, tool error,
not sent, in doubt, ``if:``, ``always()``/``failure()``, ``continue_on_error``, resume with each decision) runs
as ``mcp-run FILE --json`` on the local engine and with ``--engine temporal`` on one dev server and one worker
for the module (the rows overlap), and both report the same exit codes, step statuses, counts and skip causes,
and ran the tool the same number of times per key (the number the scenario expects).

A row known to differ today is ``xfail(strict=True, raises=Drift)`` with the difference as its reason: only the
comparison of the two engines may fail it (a wrong exit code or count on either engine still fails the row),
and a row that stops differing fails until its mark is removed. The table ``scenario | local | temporal`` is
printed at the end of the module (and by ``python -m tests.temporal.conformance``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tests.temporal.conformance import SCENARIOS, Scenario, Seen, run_both, table, temporal_service

Both = tuple[Seen, Seen]

# One worker under pytest-xdist (scripts/test.sh runs --dist loadgroup): the module fixture starts every row a
# worker collected, so rows split across two workers would each run the whole table.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("executors_conformance")]


class Drift(AssertionError):
    """The two engines reported a scenario differently."""


# Rows known to differ between the executors, with the difference: none since issue 26 (resume-accept and
# not-sent differed before it).
DRIFT: dict[str, str] = {}


def _row(scenario: Scenario) -> object:
    if scenario.name in DRIFT:
        mark = pytest.mark.xfail(strict=True, raises=Drift, reason=DRIFT[scenario.name])
        return pytest.param(scenario, id=scenario.name, marks=mark)
    return pytest.param(scenario, id=scenario.name)


@pytest.fixture(scope="module")
def seen(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Both]]]:
    """Every selected row, started at once on one dev server and one worker (three rows at a time: most of a
    row's time is waiting on subprocesses and on Temporal's retries, so rows overlap well); each test takes its
    own. The table is printed once they are done."""
    chosen = {
        item.callspec.params["scenario"].name
        for item in request.session.items
        if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
    }
    folder = tmp_path_factory.mktemp("conformance")
    with temporal_service() as address, ThreadPoolExecutor(3) as pool:
        futures = {
            scenario.name: pool.submit(run_both, folder / scenario.name, scenario, address)
            for scenario in sorted(SCENARIOS, key=lambda scenario: scenario.name != "not-sent")  # the longest first
            if scenario.name in chosen
        }
        yield futures
        done = [(name, *futures[name].result()) for name in (s.name for s in SCENARIOS) if name in futures]
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is not None:
        with capture.global_and_fixture_disabled():  # the table is for the reader: past the capture
            print("\n\nexecutors' conformance table:\n" + table(done))


@pytest.mark.parametrize("scenario", [_row(scenario) for scenario in SCENARIOS])
def test_both_executors_report_the_same(scenario: Scenario, seen: dict[str, Future[Both]]) -> None:
    local, temporal = seen[scenario.name].result(timeout=600)
    for engine, got in (("local", local), ("temporal", temporal)):
        assert got.exit_codes[-1] == scenario.exit_code, f"{engine}: {got.cell()}\n{got.errors}"
        assert got.runs == scenario.runs, f"{engine}: {got.cell()}"
        assert len(got.exit_codes) == (1 if scenario.decision is None else 2), f"{engine}: {got.errors}"
    if local != temporal:
        raise Drift(f"local:    {local.cell()}\ntemporal: {temporal.cell()}")
