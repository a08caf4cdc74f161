"""Support for tests and for the conformance suite, not used by a run: the memory transport, the conformance client."""
