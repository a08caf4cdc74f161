"""The sans-IO protocol core: JSON-RPC messages, NDJSON framing, the SSE parser, MCP wire types. No I/O."""
