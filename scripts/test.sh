#!/usr/bin/env bash
# Set up (if needed) and run the test suite: lint, types, then pytest. Extra arguments go to pytest.
# `scripts/test.sh --quick [ARGS]` runs the quick tier instead (docs/testing.md): the unit tests, without the
# slow and the integration ones.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
if [ "${1:-}" = "--quick" ]; then
    shift
    quick=(-m "not slow and not integration" tests/test_*.py)
fi
scripts/setup.sh
.venv/bin/ruff check runner tests scripts
.venv/bin/ruff format --check runner tests scripts
.venv/bin/mypy
# pytest-xdist: one worker per CPU (MCP_RUN_TEST_WORKERS overrides; 0 runs in this one process). Most of the
# suite's time is spent waiting on real peers, dev servers and children, so the workers overlap well.
# loadgroup keeps a module marked xdist_group on one worker (one that shares a dev server between its tests).
# Arguments given after ours win: `scripts/test.sh -n 0` runs serially.
# Bytecode is written even when the environment forbids it (PYTHONDONTWRITEBYTECODE): each xdist worker and each
# of the hundreds of `python -m runner` children the suite starts would otherwise compile runner/ again, and
# pytest rewrite every test module again, each time (about a third of the CPU of an end-to-end module).
unset PYTHONDONTWRITEBYTECODE
set +e
.venv/bin/python -m pytest -n "${MCP_RUN_TEST_WORKERS:-auto}" --dist loadgroup ${quick[@]+"${quick[@]}"} "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a broken suite here, not a pass.
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
