#!/usr/bin/env bash
# mcp-run's conformance scores beside the official Python SDK's, measured in the same run with the same
# pinned suite: scripts/conformance.sh (every scenario of both revisions and the extensions) once with
# mcp-run's client and once with scripts/sdk_conformance_client.py (a small client on the SDK, mcp 2.3.0,
# in the venv), then a table: per group, passed / scored scenarios (the frozen --requirements sets for the
# revisions), and which scenarios each client failed. Measuring only: nothing is judged, exit 0 unless a
# run could not be made. Takes twice a conformance run (a few minutes).
#
#     scripts/conformance-scores.sh [RESULTS_DIR]    the suite's results are kept there when given
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=.venv/bin/python
if [ "$#" -gt 0 ]; then
    results=$1
    mkdir -p "$results"
else
    results=$(mktemp -d)
    trap 'rm -rf "$results"' EXIT
fi

echo "== mcp-run (python -m runner.testing.conformance)"
scripts/conformance.sh --report-only --results "$results/mcp-run" \
    --client "$PYTHON -m runner.testing.conformance" >"$results/mcp-run.log" 2>&1 || {
    cat "$results/mcp-run.log"
    exit 1
}
grep "scenario runs in" "$results/mcp-run.log"
echo "== official Python SDK (scripts/sdk_conformance_client.py)"
# The SDK's client imports much more than mcp-run's: on a busy machine it needs more than the suite's 30 s.
scripts/conformance.sh --report-only --results "$results/sdk" --timeout 60000 \
    --client "$PYTHON scripts/sdk_conformance_client.py" >"$results/sdk.log" 2>&1 || {
    cat "$results/sdk.log"
    exit 1
}
echo
"$PYTHON" -m runner.testing.conformance_results scores "mcp-run=$results/mcp-run" "python-sdk=$results/sdk"
