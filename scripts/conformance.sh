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
# scored. Then every client scenario neither revision lists, run without `--spec-version` (the suite calls
# them not applicable at a revision), judged, not scored: those the suite tags `[extension]` in group
# `extensions` (client credentials, jwt-bearer, enterprise-managed authorization, DPoP, ...), the others in
# group `earlier` (older revisions' scenarios: the 2025-03-26 OAuth back-compat ones). Nothing is
# hard-coded but NOT_APPLICABLE below: the scenarios that do not apply to a client like mcp-run's, each
# with its reason, not run and printed as such. A scenario a new suite adds is run, and fails the run
# until it passes or is listed (here, or as an expected failure).
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
# Client scenarios outside both revisions that do not apply to mcp-run's client: scenario -> reason.
declare -A NOT_APPLICABLE=(
    [sep-2640-client-no-prefetch]="skills extension (SEP-2640): mcp-run runs tool calls, it is not a skills host (it never lists or loads skills)"
    [sep-2640-client-verify-digest]="skills extension (SEP-2640): no skills host, so no skill file is read to verify"
    [sep-2640-client-verify-size]="skills extension (SEP-2640): no skills host, so no skill file is read to verify"
    [sep-2640-client-verify-frontmatter]="skills extension (SEP-2640): no skills host, so no SKILL.md is parsed"
)

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
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
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

# "NAME TAGS" for every client scenario (TAGS: the bracketed list, e.g. `extension` or `2025-03-26`).
tagged_client_scenarios() {
    "$NODE" "$SUITE" list --client | sed -n '/^Client scenarios/,/^$/p' | sed -n 's/^  - \([^ ]*\) \[\(.*\)\]$/\1 \2/p'
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
in_revisions=()
for revision in "${REVISIONS[@]}"; do
    mapfile -t listed < <(client_scenarios --spec-version "$revision")
    mapfile -t required < <(client_scenarios --requirements "$revision")
    if [ "${#listed[@]}" -eq 0 ] || [ "${#required[@]}" -eq 0 ]; then
        echo "conformance.sh: the suite listed no client scenarios for $revision" >&2
        exit 1
    fi
    in_revisions+=("${listed[@]}")
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
mapfile -t tagged < <(tagged_client_scenarios)
if [ "${#tagged[@]}" -eq 0 ]; then
    echo "conformance.sh: the suite listed no client scenarios" >&2
    exit 1
fi
for name in "${!NOT_APPLICABLE[@]}"; do
    if ! contains "$name" "${tagged[@]%% *}"; then
        echo "conformance.sh: NOT_APPLICABLE names $name, which the suite does not list: remove it" >&2
        exit 1
    fi
done
not_run=()
for line in "${tagged[@]}"; do
    scenario=${line%% *}
    tags=${line#* }
    contains "$scenario" "${in_revisions[@]}" && continue
    wanted "$scenario" || continue
    if [ -n "${NOT_APPLICABLE[$scenario]:-}" ]; then
        not_run+=("$scenario: ${NOT_APPLICABLE[$scenario]}")
        continue
    fi
    group=earlier
    [ "$tags" = extension ] && group=extensions
    mkdir -p "$results/$group"
    spawn "$group" "$scenario" 0
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
for line in "${not_run[@]}"; do
    echo "  not applicable, not run: $line"
done
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
