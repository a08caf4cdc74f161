"""The Streamable HTTP transport, one package: parameters, the classification table, the connection's
state, POSTs, stream readers, and the transport that joins them."""
