#!/usr/bin/env bash
# Set up (if needed) and run the test suite: lint, types, then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check runner tests scripts
.venv/bin/ruff format --check runner tests scripts
.venv/bin/mypy
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a broken suite here, not a pass.
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
