#!/usr/bin/env bash
# Set up a development environment on a fresh machine: a virtualenv in .venv with mcp-run and its test
# extras, and the pinned npm peers (server-everything, server-filesystem, the conformance suite, Node 22) in peers/.
# Idempotent: a second run only checks that everything is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [ "${MCP_RUN_SKIP_NPM:-}" != 1 ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "setup: npm is needed for the real test peers; installing Debian's nodejs and npm" >&2
        apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
    fi
    if [ ! -d peers/node_modules ] || [ peers/package-lock.json -nt peers/node_modules ]; then
        (cd peers && npm ci --no-audit --no-fund --loglevel=error)
    fi
fi
