"""The 2026-07-28 header mirror: value encoding (property tests, checked against the official SDK's decoder)
and the x-mcp-header rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.protocol.headers import (
    MAX_SAFE_INTEGER,
    HeaderMark,
    InvalidHeaderMarking,
    decode_header_value,
    encode_header_value,
    header_marks,
    param_headers,
)

SENTINEL = "=?base64?"


def _plain_safe(value: str) -> bool:
    return all(0x20 <= ord(c) <= 0x7E for c in value) and value == value.strip(" ") and value != ""


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ("a b", "a b"),
        ("tab\there", "=?base64?dGFiCWhlcmU=?="),
        ("", "=?base64??="),
        ("=?base64?", "=?base64?"),  # not the whole sentinel: plain
    ],
)
def test_the_revisions_examples_and_edges(value: str, encoded: str) -> None:
    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded) == value


@given(st.text())
def test_every_string_round_trips_and_is_a_legal_header_value(value: str) -> None:
    encoded = encode_header_value(value)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert encoded == encoded.strip(" ")
    assert decode_header_value(encoded) == value


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_plain_visible_ascii_is_sent_as_it_is_unless_it_looks_encoded(value: str) -> None:
    encoded = encode_header_value(value)
    looks_encoded = value.startswith(SENTINEL) and value.endswith("?=") and len(value) >= 11
    if _plain_safe(value) and not looks_encoded:
        assert encoded == value
    else:
        assert encoded.startswith(SENTINEL) and encoded.endswith("?=")


@given(st.text())
def test_the_official_sdk_server_decodes_what_we_encode(value: str) -> None:
    sdk = pytest.importorskip("mcp.shared.inbound")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: not valid UTF-8, the SDK cannot read it back (nor can any server)
    assert sdk.decode_header_value(encode_header_value(value)) == value


def test_a_broken_sentinel_decodes_to_nothing() -> None:
    assert decode_header_value("=?base64?!!!?=") is None
    assert decode_header_value("=?base64?/w==?=") is None  # 0xff: not UTF-8


def _schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_marks_are_found_through_properties_only() -> None:
    schema = _schema(
        region={"type": "string", "x-mcp-header": "Region"},
        nested={"type": "object", "properties": {"tenant": {"type": "integer", "x-mcp-header": "Tenant"}}},
        query={"type": "string"},
    )
    assert header_marks(schema) == (
        HeaderMark("Region", ("region",), "string"),
        HeaderMark("Tenant", ("nested", "tenant"), "integer"),
    )


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (_schema(a={"type": "string", "x-mcp-header": ""}), "non-empty"),
        (_schema(a={"type": "string", "x-mcp-header": "Bad Name"}), "token"),
        (_schema(a={"type": "string", "x-mcp-header": "X\r\nEvil"}), "token"),
        (_schema(a={"type": "string", "x-mcp-header": 7}), "non-empty string"),
        (_schema(a={"type": "number", "x-mcp-header": "N"}), "string, integer or boolean"),
        (_schema(a={"type": "object", "x-mcp-header": "O"}), "string, integer or boolean"),
        (_schema(a={"x-mcp-header": "Untyped"}), "string, integer or boolean"),
        (
            _schema(a={"type": "string", "x-mcp-header": "Same"}, b={"type": "string", "x-mcp-header": "same"}),
            "twice",
        ),
        (_schema(a={"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}), "properties"),
        (_schema(a={"oneOf": [{"type": "string", "x-mcp-header": "O"}]}), "properties"),
        ({"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}, "properties"),
        ({"type": "string", "x-mcp-header": "Root"}, "root"),
    ],
)
def test_invalid_marks_are_refused_with_a_reason(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidHeaderMarking, match=reason):
        header_marks(schema)


def test_param_headers_convert_and_omit_as_the_revision_says() -> None:
    marks = header_marks(
        _schema(
            s={"type": "string", "x-mcp-header": "S"},
            i={"type": "integer", "x-mcp-header": "I"},
            b={"type": "boolean", "x-mcp-header": "B"},
            n={"type": "string", "x-mcp-header": "Null"},
            m={"type": "string", "x-mcp-header": "Missing"},
            o={"type": "object", "properties": {"deep": {"type": "boolean", "x-mcp-header": "Deep"}}},
        )
    )
    arguments = {"s": "Hello, 世界", "i": -7, "b": True, "n": None, "o": {"deep": False}}
    assert param_headers(marks, arguments) == {
        "Mcp-Param-S": "=?base64?SGVsbG8sIOS4lueVjA==?=",
        "Mcp-Param-I": "-7",
        "Mcp-Param-B": "true",
        "Mcp-Param-Deep": "false",
    }
    # outside JavaScript's safe range: no header (the server's own check refuses the call)
    assert param_headers(marks, {"i": MAX_SAFE_INTEGER + 1}) == {}
