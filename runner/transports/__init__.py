"""Transports behind one small interface (:mod:`runner.transports.base`): stdio and Streamable HTTP."""
