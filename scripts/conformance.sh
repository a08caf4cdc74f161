#!/usr/bin/env bash
# Run the pinned MCP conformance suite (peers/: @modelcontextprotocol/conformance 0.2.0-alpha.12, Node 22)
# against a client (by default mcp-run's, `python -m runner.testing.conformance`), per protocol revision.
#
#     scripts/conformance.sh                     every group below, judged against tests/conformance/
#     scripts/conformance.sh sse-retry ...       only the scenarios named, in every group that has them
#     scripts/conformance.sh --client CMD --results DIR --report-only [--jobs N] [--timeout MS]
#                                                another client (scripts/conformance-scores.sh), kept results,
#                                                scores printed but not judged
#
# Groups: for each revision (2025-11-25, 2026-07-28) every client scenario the suite lists for
# `--spec-version REV`, run at that revision's wire; the scenarios of the frozen `--requirements REV` set
# are the scored ones (18 and 32), the rest (json-schema-2020-12-preservation) is run and judged but not
# scored. Then `extensions`: the client-credentials, jwt-bearer and DPoP scenarios, run without
# `--spec-version` (the suite calls them not applicable at a revision).
#
# Scenarios run --jobs N at a time (default 4, or $CONFORMANCE_JOBS), except `sse-retry`, which runs alone
# at the end: it measures how long the client waits before reconnecting (a FAILURE under 450 ms, a
# WARNING over 700 ms), and clients starting all at once on a small machine delay that wait. Each scenario's results go to a folder (`-o`);
# runner/testing/conformance_results.py judges them: a scenario passes only if a check succeeded and none
# failed or warned (all checks SKIPPED is a failure), and each group must match
# tests/conformance/expected-failures-GROUP.yaml (each entry with a one-line reason). Exits 1 on any
# unexpected result. Needs scripts/setup.sh (the venv and `npm ci` in peers/).
set -uo pipefail
cd "$(dirname "$0")/.."

NODE=peers/node_modules/.bin/node
SUITE=peers/node_modules/@modelcontextprotocol/conformance/dist/index.js
EXPECTED=tests/conformance
PYTHON=.venv/bin/python
CLIENT="$PYTHON -m runner.testing.conformance"
REVISIONS=(2025-11-25 2026-07-28)
EXTENSIONS=(auth/client-credentials-basic auth/client-credentials-jwt auth/wif-jwt-bearer auth/dpop auth/dpop-nonce)

results=""
report_only=0
jobs=${CONFORMANCE_JOBS:-4}
timeout_ms=()  # the suite's per-scenario client timeout (its default: 30 s)
only=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --client) CLIENT=$2; shift 2 ;;
        --results) results=$2; shift 2 ;;
        --report-only) report_only=1; shift ;;
        --jobs) jobs=$2; shift 2 ;;
        --timeout) timeout_ms=(--timeout "$2"); shift 2 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        -*) echo "conformance.sh: unknown option $1" >&2; exit 2 ;;
        *) only+=("$1"); shift ;;
    esac
done

for needed in "$NODE" "$SUITE" "$PYTHON"; do
    if [ ! -e "$needed" ]; then
        echo "conformance.sh: $needed is missing: run scripts/setup.sh" >&2
        exit 1
    fi
done

if [ -z "$results" ]; then
    results=$(mktemp -d)
    trap 'rm -rf "$results"' EXIT
else
    rm -rf "$results" && mkdir -p "$results"
fi

# The names the suite lists under "Client scenarios" (for `list --requirements`, only that section).
client_scenarios() {
    "$NODE" "$SUITE" list --client "$@" | sed -n '/^Client scenarios/,/^$/p' | sed -n 's/^  - \([^ ]*\).*/\1/p'
}

wanted() {
    local name
    [ "${#only[@]}" -eq 0 ] && return 0
    for name in "${only[@]}"; do
        [ "$name" = "$1" ] && return 0
    done
    return 1
}

contains() {
    local needle=$1 item
    shift
    for item in "$@"; do
        [ "$item" = "$needle" ] && return 0
    done
    return 1
}

# run_one GROUP SCENARIO SCORED [suite options...]: one scenario, its line appended to GROUP/runs.tsv.
run_one() {
    local group=$1 scenario=$2 scored=$3
    shift 3
    local safe=${scenario//\//_}
    local out="$results/$group/$safe"
    mkdir -p "$out"
    "$NODE" "$SUITE" client --command "$CLIENT" --scenario "$scenario" -o "$out" "${timeout_ms[@]}" "$@" >"$out.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\t%s\n' "$scenario" "$scored" "$rc" "$safe" >>"$results/$group/runs.tsv"
    printf '  %-50s exit %s\n' "$group $scenario" "$rc"
}

# spawn ARGS...: run_one ARGS in the background, at most $jobs at a time.
spawn() {
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n
    done
    run_one "$@" &
}

start=$SECONDS
ran=0
timed=()
for revision in "${REVISIONS[@]}"; do
    mapfile -t listed < <(client_scenarios --spec-version "$revision")
    mapfile -t required < <(client_scenarios --requirements "$revision")
    if [ "${#listed[@]}" -eq 0 ] || [ "${#required[@]}" -eq 0 ]; then
        echo "conformance.sh: the suite listed no client scenarios for $revision" >&2
        exit 1
    fi
    mkdir -p "$results/$revision"
    for scenario in "${listed[@]}"; do
        wanted "$scenario" || continue
        scored=0
        contains "$scenario" "${required[@]}" && scored=1
        if [ "$scenario" = sse-retry ]; then
            timed+=("$revision")  # alone, below
        else
            spawn "$revision" "$scenario" "$scored" --spec-version "$revision"
        fi
        ran=$((ran + 1))
    done
done
mkdir -p "$results/extensions"
for scenario in "${EXTENSIONS[@]}"; do
    wanted "$scenario" || continue
    spawn extensions "$scenario" 0
    ran=$((ran + 1))
done
wait
for revision in "${timed[@]}"; do
    run_one "$revision" sse-retry 1 --spec-version "$revision"
done
# A group that ran nothing has no verdict to give.
for group in "$results"/*/; do
    [ -s "$group/runs.tsv" ] || rm -rf "$group"
done

echo "conformance: $ran scenario runs in $((SECONDS - start)) s"
if [ "$ran" -eq 0 ]; then
    echo "conformance.sh: no scenario matched ${only[*]}" >&2
    exit 1
fi
if [ "$report_only" = 1 ]; then
    "$PYTHON" -m runner.testing.conformance_results scores "client=$results"
    exit $?
fi
partial=()
[ "${#only[@]}" -gt 0 ] && partial=(--partial)
if ! "$PYTHON" -m runner.testing.conformance_results check "$results" "$EXPECTED" "${partial[@]}"; then
    echo "conformance.sh: the suite's log of each scenario is GROUP/SCENARIO.log under --results DIR (kept when given)" >&2
    exit 1
fi
