"""Fixtures shared by the end-to-end tests (their helpers are in :mod:`tests.e2e.support`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import oauth_server


@pytest.fixture
def oauth_loopback(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The loopback OAuth server of :func:`tests.e2e.support.oauth_server`: its origin and its issued-tokens file."""
    with oauth_server(tmp_path) as found:
        yield found
