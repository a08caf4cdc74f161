"""The demo MCP server of ``workflows/``: a real Markdown -> HTML batch converter on the official SDK.

Needs the ``demo`` extra (``mcp``, ``markdown-it-py``, ``uvicorn``); this package's own
``__init__`` imports nothing from it, so ``runner`` stays importable without the extra.
Run it with ``python -m runner.demo``; see :mod:`runner.demo.server`.
"""
