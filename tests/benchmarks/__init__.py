"""Benchmarks: mcp-run's client against the official MCP SDK client and a raw pipe loop (see BENCHMARKS.md).

Run with ``.venv/bin/python -m tests.benchmarks [--smoke]``. Nothing here is collected by pytest.
"""
