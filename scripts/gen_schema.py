"""Regenerate ``schemas/workflow.schema.json`` from the pydantic models in :mod:`runner.workflow.model`.

Usage: ``python scripts/gen_schema.py`` (write) or ``python scripts/gen_schema.py --check`` (exit 1 when
the committed file is stale). ``python -m runner.workflow.model`` does the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.workflow.model import SCHEMA_PATH, write_schema


def main(argv: list[str]) -> int:
    check = "--check" in argv
    if not write_schema(check=check):
        print(f"{SCHEMA_PATH} is stale; regenerate it with: python scripts/gen_schema.py", file=sys.stderr)
        return 1
    print(f"{SCHEMA_PATH} is up to date" if check else f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
