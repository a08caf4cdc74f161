"""The HTTP transports, one package: the Streamable HTTP transport (parameters, the classification table, the
connection's state, POSTs, stream readers, and the transport that joins them) and the legacy HTTP+SSE one
(``legacy_sse``), which shares its parameters, bodies and failure table."""
