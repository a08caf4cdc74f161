"""OAuth for MCP servers over HTTP: discovery, grants for machines, a stored login, and the hook the
Streamable HTTP transport calls (:class:`runner.auth.provider.OAuthProvider`)."""
