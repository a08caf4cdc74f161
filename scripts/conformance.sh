#!/usr/bin/env bash
# Run the pinned MCP conformance suite (peers/: @modelcontextprotocol/conformance 0.1.16, Node 22) against
# mcp-run's client, `python -m runner.testing.conformance`, one client scenario at a time.
#
#     scripts/conformance.sh              every client scenario the suite lists
#     scripts/conformance.sh sse-retry    only the scenarios named
#
# A scenario listed in tests/conformance/expected-failures.yaml must fail (each entry says why); every
# other one must pass, with its client exiting 0 and no FAILURE or WARNING check. Scenarios run one after
# another, not with the suite's parallel `--suite all`: `sse-retry` measures how long the client waits
# before reconnecting (a FAILURE under 450 ms, a WARNING over 700 ms), and two dozen clients starting at
# once on a small machine delay that wait. Exits 1 on any unexpected result; a scenario's log is printed
# when it misbehaves. Needs scripts/setup.sh (the venv and `npm ci` in peers/).
set -euo pipefail
cd "$(dirname "$0")/.."

NODE=peers/node_modules/.bin/node
SUITE=peers/node_modules/@modelcontextprotocol/conformance/dist/index.js
BASELINE=tests/conformance/expected-failures.yaml
PYTHON=.venv/bin/python
CLIENT="$PYTHON -m runner.testing.conformance"

for needed in "$NODE" "$SUITE" "$PYTHON"; do
    if [ ! -e "$needed" ]; then
        echo "conformance.sh: $needed is missing: run scripts/setup.sh" >&2
        exit 1
    fi
done

if [ "$#" -gt 0 ]; then
    scenarios=("$@")
else
    mapfile -t scenarios < <("$NODE" "$SUITE" list --client | sed -n 's/^  - \([^ ]*\).*/\1/p')
    if [ "${#scenarios[@]}" -eq 0 ]; then
        echo "conformance.sh: the suite listed no client scenarios" >&2
        exit 1
    fi
fi

mapfile -t expected < <("$PYTHON" -c '
import sys, yaml
with open(sys.argv[1], encoding="utf-8") as f:
    print("\n".join((yaml.safe_load(f) or {}).get("client") or []))
' "$BASELINE")

is_expected() {
    local name
    for name in "${expected[@]}"; do
        [ "$name" = "$1" ] && return 0
    done
    return 1
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

passed=0
failed_as_expected=0
unexpected=()
start=$SECONDS
for scenario in "${scenarios[@]}"; do
    log="$logs/${scenario//\//_}.log"
    if is_expected "$scenario"; then
        # With a baseline the suite exits 0 only if the scenario fails (a pass means a stale entry).
        if "$NODE" "$SUITE" client --command "$CLIENT" --scenario "$scenario" \
            --expected-failures "$BASELINE" >"$log" 2>&1; then
            echo "expected failure  $scenario"
            failed_as_expected=$((failed_as_expected + 1))
        else
            echo "UNEXPECTED        $scenario (listed as an expected failure, but it did not fail as expected)"
            unexpected+=("$scenario")
            cat "$log"
        fi
    else
        if "$NODE" "$SUITE" client --command "$CLIENT" --scenario "$scenario" >"$log" 2>&1; then
            echo "pass              $scenario"
            passed=$((passed + 1))
        else
            echo "FAIL              $scenario"
            unexpected+=("$scenario")
            cat "$log"
        fi
    fi
done

echo "conformance: ${#scenarios[@]} client scenarios in $((SECONDS - start)) s: $passed passed," \
    "$failed_as_expected failed as expected, ${#unexpected[@]} unexpected"
if [ "${#unexpected[@]}" -gt 0 ]; then
    echo "conformance: unexpected: ${unexpected[*]}" >&2
    exit 1
fi
