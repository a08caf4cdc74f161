#!/usr/bin/env bash
# Set up a development environment on a fresh machine: a virtualenv in .venv with mcp-run and its test
# extras (test takes in demo, temporal, auth and otel: OpenTelemetry's tests and mypy need it), the pinned
# npm peers (server-everything, server-filesystem, the conformance suite, Node 22) in peers/, and Debian's
# chromium for the HTML report's screenshot test.
# Idempotent: a second run only checks that everything is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# A .venv (or peers/node_modules) that is a link is another checkout's, shared (a git worktree's): installing
# into it would point that checkout's editable install here, or empty its peers while it runs them.
if [ -L .venv ]; then
    echo "setup: .venv is a link to a shared environment: not reinstalling into it" >&2
else
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
fi

if [ "${MCP_RUN_SKIP_NPM:-}" != 1 ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "setup: npm is needed for the real test peers; installing Debian's nodejs and npm" >&2
        apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
    fi
    if [ -L peers/node_modules ]; then
        :  # shared (see above)
    elif [ ! -d peers/node_modules ] || [ peers/package-lock.json -nt peers/node_modules ]; then
        (cd peers && npm ci --no-audit --no-fund --loglevel=error)
    fi
fi

# Chromium renders the HTML report in its screenshot test (tests/integration/test_report_chromium.py). Installed
# only when missing and only where apt-get is; a machine where it cannot be had still sets up (the test skips,
# or fails under MCP_RUN_REQUIRE_PEERS=1).
if [ "${MCP_RUN_SKIP_CHROMIUM:-}" != 1 ] && ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing Debian's chromium (the HTML report's screenshot test)" >&2
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
            echo "setup: warning: chromium could not be installed; the report's screenshot test will be skipped" >&2
        fi
    else
        echo "setup: no apt-get here: install chromium to run the report's screenshot test" >&2
    fi
fi
