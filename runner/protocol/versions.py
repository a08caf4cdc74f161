"""The protocol revisions mcp-run speaks, by era, and what a user may pin (pure constants).

Legacy revisions (2024-11-05 to 2025-11-25) open a session with the ``initialize`` handshake; modern ones
(2026-07-28) carry their version in every request. ``auto`` lets the session find out (see
:mod:`runner.session.negotiate`).
"""

from __future__ import annotations

from typing import Final, Literal

from runner.protocol.mcp import SUPPORTED_PROTOCOL_VERSIONS

__all__ = ["LEGACY_PROTOCOL_VERSIONS", "MODERN_PROTOCOL_VERSIONS", "PROTOCOL_CHOICES", "ProtocolChoice"]

LEGACY_PROTOCOL_VERSIONS: Final = SUPPORTED_PROTOCOL_VERSIONS
MODERN_PROTOCOL_VERSIONS: Final = ("2026-07-28",)
PROTOCOL_CHOICES: Final = ("auto", *LEGACY_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
"""What ``--protocol-version`` and a server's ``protocol:`` accept: ``auto`` or an exact revision."""

ProtocolChoice = Literal["auto", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
""":data:`PROTOCOL_CHOICES` as a type (a test keeps the two equal)."""
