#!/usr/bin/env bash
# Set up (if needed) and run the test suite: lint, types, then pytest. Extra arguments go to pytest.
# `scripts/test.sh --quick [ARGS]` runs the quick tier instead (docs/testing.md): the unit tests, without the
# slow and the integration ones.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
# Two workers per CPU for the whole suite: most of its time is spent waiting on real peers, Temporal dev servers
# and killed children, so a CPU's second worker runs while the first waits (docs/testing.md has the times).
# The quick tier is CPU-bound: one worker per CPU.
workers=$(( $(nproc 2>/dev/null || echo 1) * 2 ))
if [ "${1:-}" = "--quick" ]; then
    shift
    quick=(-m "not slow and not integration" tests/test_*.py)
    workers=auto
fi
scripts/setup.sh
.venv/bin/ruff check runner tests scripts
.venv/bin/ruff format --check runner tests scripts
.venv/bin/mypy
# pytest-xdist with the workers chosen above (MCP_RUN_TEST_WORKERS overrides; 0 runs in this one process).
# loadgroup keeps a module marked xdist_group on one worker (one that shares a dev server between its tests).
# Arguments given after ours win: `scripts/test.sh -n 0` runs serially.
# Bytecode is written even when the environment forbids it (PYTHONDONTWRITEBYTECODE): each xdist worker and each
# of the hundreds of `python -m runner` children the suite starts would otherwise compile runner/ again, and
# pytest rewrite every test module again, each time (about a third of the CPU of an end-to-end module).
unset PYTHONDONTWRITEBYTECODE
set +e
.venv/bin/python -m pytest -n "${MCP_RUN_TEST_WORKERS:-$workers}" --dist loadgroup ${quick[@]+"${quick[@]}"} "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a broken suite here, not a pass.
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
