"""The HTML report rendered by a real browser: Debian's ``chromium``, headless, with every network feature off,
takes a screenshot of the page of a real run (failed, in-doubt and retried items); the PNG is decoded and checked
for content: the page's size, mostly light background, and the colours of failed and succeeded calls drawn.

``scripts/setup.sh`` installs chromium where apt-get can; without it the test is skipped (a failure under
``MCP_RUN_REQUIRE_PEERS=1``).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from runner.cli import main
from tests.integration.peers import missing_peer
from tests.report_run import RUN_ID, write_run

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1200, 900


def _browser() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    missing_peer("chromium is not installed (scripts/setup.sh installs Debian's chromium)")
    raise AssertionError("unreachable")


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, its pixels as RGB bytes) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
    width, height, depth, color, _c, _f, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [row[i : i + 3] for row in rows for i in range(0, stride, bpp)]


def _near(pixel: bytes, color: str, tolerance: int = 40) -> bool:
    target = bytes.fromhex(color.lstrip("#"))
    return all(abs(p - t) <= tolerance for p, t in zip(pixel, target, strict=True))


def test_chromium_renders_the_report_with_content(tmp_path: Path) -> None:
    browser = _browser()
    write_run(tmp_path)
    page = tmp_path / "report.html"
    assert main(["report", RUN_ID, "--state-dir", str(tmp_path), "--html", str(page)]) == 0
    shot = tmp_path / "shot.png"
    argv = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
        page.resolve().as_uri(),
    ]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    data = shot.read_bytes()
    assert len(data) > 10_000, len(data)  # a blank page of this size compresses to far less
    width, height, pixels = decode_png(data)
    assert (width, height) == (WIDTH, HEIGHT)
    light = sum(1 for p in pixels if min(p) > 220)
    assert 0.5 < light / len(pixels) < 0.995  # a page, with things on it
    dark = sum(1 for p in pixels if max(p) < 80)
    assert dark > 2_000  # text
    assert any(_near(p, "#d2413a") for p in pixels)  # the red of failures (the cards and the DAG's convert box)
    assert any(_near(p, "#8e5bd0") for p in pixels)  # the purple of doubt (the badge, the in-doubt box)
