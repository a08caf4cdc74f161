"""Real MCP servers the integration tests start (official SDK test peer)."""
