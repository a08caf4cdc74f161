"""The SSE parser of :mod:`runner.protocol.sse`: the event-stream rules MCP relies on, its caps, and that
its output does not depend on how the bytes are chunked (down to one byte at a time)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from runner.errors import FrameTooLarge
from runner.protocol.sse import SSEEvent, SSEParser


def parse(*chunks: bytes, max_event_bytes: int = 1 << 20) -> list[SSEEvent]:
    parser = SSEParser(max_event_bytes)
    out: list[SSEEvent] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    out.extend(parser.close())
    return out


def test_parser_priming_event_and_per_event_ids() -> None:
    assert parse(b"id: p\ndata:\n\ndata: {}\n\nid: q\nevent: message\ndata: [1]\n\n") == [
        SSEEvent("", id="p"),
        SSEEvent("{}", id=None),  # not inherited: this event had no id of its own
        SSEEvent("[1]", id="q"),
    ]


def test_parser_id_only_and_retry_only_blocks_are_events() -> None:
    assert parse(b"id: 7\n\nretry: 1500\n\n") == [SSEEvent(id="7"), SSEEvent(retry=1500)]


@pytest.mark.parametrize("value", ["1.5", "-1", "soon", "", "１２"])
def test_parser_invalid_retry_is_ignored(value: str) -> None:
    assert parse(f"retry: {value}\ndata: x\n\n".encode()) == [SSEEvent("x")]


def test_parser_comments_and_unknown_fields_make_no_event() -> None:
    assert parse(b": ping\n\nfoo: bar\n\n:\n\n") == []


def test_parser_line_endings_bom_and_multiline_data() -> None:
    assert parse(b"\xef\xbb\xbfdata: a\r\ndata:b\rdata:  c\n\r\n") == [SSEEvent("a\nb\n c")]


def test_parser_field_without_colon_and_nul_in_id() -> None:
    assert parse(b"data\nid: a\x00b\n\n") == [SSEEvent("")]


def test_parser_discards_an_event_cut_by_the_end_of_the_stream() -> None:
    assert parse(b'data: {"partial": tr') == []
    assert parse(b"data: x\n") == []


def test_parser_lone_cr_at_the_end_completes_a_line() -> None:
    assert parse(b"data: x\r", b"\r") == [SSEEvent("x")]
    parser = SSEParser()
    assert parser.feed(b"data: x\r\r") == []  # the last \r may be half of \r\n
    assert parser.close() == [SSEEvent("x")]


def test_parser_caps_lines_and_events() -> None:
    with pytest.raises(FrameTooLarge) as line:
        parse(b"data: " + b"x" * 200, max_event_bytes=100)
    assert str(line.value) == (
        "a server-sent event exceeded the 100-byte cap (at least 206 bytes in one line); "
        "raise the limit with --max-message-size if this is expected"
    )
    with pytest.raises(FrameTooLarge) as event:
        parse(b"data: " + b"x" * 60 + b"\n" + b"data: " + b"y" * 60 + b"\n", max_event_bytes=100)
    assert str(event.value) == (
        "a server-sent event exceeded the 100-byte cap (at least 134 bytes); "
        "raise the limit with --max-message-size if this is expected"
    )
    assert parse(b"data: " + b"x" * 80 + b"\n\n", max_event_bytes=100) == [SSEEvent("x" * 80)]


_field_text = st.text(st.characters(exclude_characters="\r\n\x00", exclude_categories=["Cs"]), max_size=12)
_event = st.tuples(
    st.lists(_field_text, min_size=1, max_size=3),
    st.none() | _field_text,
    st.none() | st.integers(0, 10**6),
)


@hyp_settings(max_examples=300, deadline=None)
@given(
    events=st.lists(_event, max_size=6),
    newline=st.sampled_from([b"\n", b"\r", b"\r\n"]),
    bom=st.booleans(),
    comments=st.booleans(),
    data=st.data(),
)
def test_parser_result_does_not_depend_on_chunking(
    events: list[tuple[list[str], str | None, int | None]],
    newline: bytes,
    bom: bool,
    comments: bool,
    data: st.DataObject,
) -> None:
    stream = bytearray(b"\xef\xbb\xbf" if bom else b"")
    expected = []
    for lines, event_id, retry in events:
        if comments:
            stream += b": keep-alive" + newline
        if event_id is not None:
            stream += b"id: " + event_id.encode() + newline
        if retry is not None:
            stream += b"retry: " + str(retry).encode() + newline
        for line in lines:
            stream += b"data: " + line.encode() + newline
        stream += newline
        expected.append(SSEEvent("\n".join(lines), id=event_id, retry=retry))
    raw = bytes(stream)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert parse(*chunks) == parse(raw) == expected
    assert parse(*(raw[i : i + 1] for i in range(len(raw)))) == expected  # one byte at a time


def test_the_cap_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SSEParser(0)


def test_a_large_event_in_small_chunks_is_assembled() -> None:
    parser = SSEParser(max_event_bytes=1 << 20)
    payload = b"data: " + b"x" * 100_000 + b"\n\n"
    events = [e for i in range(0, len(payload), 7) for e in parser.feed(payload[i : i + 7])]
    assert events == [SSEEvent("x" * 100_000)]
