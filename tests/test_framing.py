"""NDJSON framing: any chunking gives the same lines; the size cap fails instead of growing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import FrameTooLarge
from runner.protocol.framing import LineDecoder

lines = st.lists(st.binary(min_size=1, max_size=60).map(lambda b: b.replace(b"\n", b"x").replace(b"\r", b"y")))


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


@given(lines, st.lists(st.integers(0, 10_000), max_size=30), st.booleans())
def test_any_chunking_gives_the_same_lines(items: list[bytes], cuts: list[int], crlf: bool) -> None:
    sep = b"\r\n" if crlf else b"\n"
    data = b"".join(item + sep for item in items)
    decoder = LineDecoder()
    got: list[bytes] = []
    for chunk in chunked(data, cuts):
        got.extend(decoder.feed(chunk))
    assert got == items
    assert decoder.pending == 0
    assert decoder.close() is None


def test_one_byte_at_a_time() -> None:
    decoder = LineDecoder()
    got = []
    for byte in b'{"a":1}\n\n{"b":2}\n':
        got.extend(decoder.feed(bytes([byte])))
    assert got == [b'{"a":1}', b'{"b":2}']


def test_unterminated_last_line_returned_on_close() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert decoder.close() == b'{"b"'


def test_cap_on_partial_line() -> None:
    decoder = LineDecoder(max_size=10)
    decoder.feed(b"12345")
    with pytest.raises(FrameTooLarge, match="10-byte cap"):
        decoder.feed(b"678901")
    assert decoder.pending == 0


def test_cap_on_complete_line() -> None:
    decoder = LineDecoder(max_size=10)
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"12345678901\n")


def test_exactly_at_cap_is_fine() -> None:
    decoder = LineDecoder(max_size=10)
    assert decoder.feed(b"1234567890\n") == [b"1234567890"]


def test_good_lines_before_an_oversized_one_are_delivered() -> None:
    decoder = LineDecoder(max_size=10)
    assert decoder.feed(b"ok\n" + b"x" * 20 + b"\n") == [b"ok"]
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"")
