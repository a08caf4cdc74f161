"""``python -m runner.demo [--transport stdio|http] [--host 127.0.0.1] [--port 0] ...`` (= ``mcp-run-demo``)."""

from runner.demo import main

raise SystemExit(main())
