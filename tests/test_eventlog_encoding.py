"""A journal line's text (:func:`runner.engine.journal.writer._dumps`, the C encoder built once) is exactly what
``runner.jsontext.dumps`` (``json.dumps`` with the escapes every sink needs) writes, for any JSON value: lone
surrogates, DEL, C1 and bidi controls escaped, integers of any size, floats as ``json`` writes them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runner import jsontext
from runner.engine.journal.writer import _dumps

_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    ["\ud800", "a\udfffb", "\x7f\x85\u202e\u2069", "é—😀"]
)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(_text, _values, max_size=5))
def test_a_journal_line_is_jsontext_dumps_compact(obj: dict[str, Any]) -> None:
    line = _dumps(obj)
    assert line == jsontext.dumps(obj, separators=(",", ":"), default=str)
    assert line.encode("utf-8")  # never raises: nothing a UTF-8 file cannot take
    assert json.dumps(json.loads(line)) == json.dumps(obj)  # lossless (NaN is NaN again)


def test_what_json_cannot_hold_is_written_as_its_text() -> None:
    assert _dumps({"a": frozenset({1}), "b": b"x"}) == '{"a":"frozenset({1})","b":"b\'x\'"}'
