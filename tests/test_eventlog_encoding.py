"""A journal line's text (:func:`runner.engine.journal.writer._dumps`, the C encoder built once) is exactly what
``runner.jsontext.dumps`` (``json.dumps`` with the escapes every sink needs) writes, for any JSON value: lone
surrogates, DEL, C1 and bidi controls escaped, integers of any size, floats as ``json`` writes them."""

from __future__ import annotations

import json
import typing
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runner import jsontext
from runner.engine.core.events import (
    AnyEvent,
    Entry,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    encode,
    written_fields,
)
from runner.engine.core.vocabulary import FailureKind
from runner.engine.journal.writer import _dumps, _line

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


_classes = st.sampled_from(typing.get_args(AnyEvent))


@given(_classes, st.data(), st.integers(min_value=1, max_value=2**40))
def test_a_line_written_without_its_dict_is_the_dicts_line(cls: type[Any], data: st.DataObject, seq: int) -> None:
    # The writer's per-class line (no dict: what every event of a run without secrets takes) is the text of
    # the generic path, byte for byte, whatever each field holds (None left out where it is optional).
    values = {name: data.draw(st.none() | _values) for name, _ in written_fields(cls) if name != "type"}
    entry = Entry(seq, "2026-12-03T14:26:36.123Z", cls(**values))
    assert _line(entry) == _dumps(encode(entry))


def test_the_hot_events_are_written_as_the_dict_path_writes_them() -> None:
    dispatched = ItemDispatched(
        step="fan", item="k\u2028é", index=None, server="s", tool="t", request_id="r", progress_token=None, attempt=2
    )
    succeeded = ItemSucceeded(step="fan", item="7", index=7, result={"content": [], "x": 1.5, "n": float("nan")})
    failed = ItemFailed(step="fan", item="7", kind=FailureKind.TOOL_ERROR, error="\ud800", retrying=True)
    for event in (dispatched, succeeded, failed):
        entry = Entry(3, "2026-12-03T14:26:36.123Z", event)
        assert _line(entry) == _dumps(encode(entry))
        assert json.loads(_line(entry))["type"] == event.type
