"""``python -m runner.demo [--transport stdio|http] [--host 127.0.0.1] [--port 0] ...``."""

from runner.demo.server import main

raise SystemExit(main())
