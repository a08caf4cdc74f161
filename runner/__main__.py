"""``python -m runner`` is ``mcp-run``."""

from runner.cli import main

raise SystemExit(main())
