"""Text that is not text (:mod:`runner.jsontext`): lone surrogates and C1 controls in JSON, on the wire, in the
journal and in hashes. JSON escapes carry them losslessly; hashes of ordinary text are what they always were."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.engine.core.events import ItemFailed, ItemSucceeded, LogMessage
from runner.engine.journal.reader import parse_journal
from runner.engine.journal.writer import EventLog
from runner.jsontext import dumps, utf8
from runner.protocol.jsonrpc import Request, decode, encode
from runner.workflow.fingerprints import fingerprints
from runner.workflow.keys import default_key
from tests.test_runctl import WORKFLOW, plan

# Every code point, lone surrogates included (st.text() leaves them out), with surrogates and controls drawn
# often: among all code points they are rare. (Not st.text(st.one_of(...)): hypothesis merges the alphabets
# into one, where they are rare again.)
ANY_TEXT = st.lists(
    st.one_of(
        st.characters(codec=None, exclude_categories=()),
        st.characters(categories=["Cs"]),
        st.sampled_from(["\x1b", "\x9b", "\x7f", "\r", "\x00", "\u202e", "\t", "\n", "😀"]),
    )
).map("".join)


def joined_pair(text: str) -> bool:
    """A high surrogate followed by a low one: JSON reads the two escapes back as the one character they
    encode (see the module docstring), so such text cannot round-trip through any JSON."""
    return any(0xD800 <= ord(a) <= 0xDBFF and 0xDC00 <= ord(b) <= 0xDFFF for a, b in itertools.pairwise(text))


JSON_TEXT = ANY_TEXT.filter(lambda t: not joined_pair(t))


@given(JSON_TEXT)
def test_dumps_round_trips_any_text_and_always_encodes(text: str) -> None:
    value = {text: [text, {"k": text}]}
    out = dumps(value, sort_keys=True)
    assert json.loads(out) == value
    out.encode("utf-8")  # never UnicodeEncodeError
    assert not any(0x7F <= ord(ch) <= 0x9F or 0xD800 <= ord(ch) <= 0xDFFF for ch in out)


@given(st.text())
def test_dumps_is_json_dumps_for_text_without_odd_code_points(text: str) -> None:
    if not any(0x7F <= ord(ch) <= 0x9F or 0x202A <= ord(ch) <= 0x2069 for ch in text):
        assert dumps([text]) == json.dumps([text], ensure_ascii=False)


def test_a_joined_pair_reads_back_as_one_character() -> None:
    assert json.loads(dumps("\ud83d\ude00")) == "😀"
    assert json.loads(dumps("\ude00\ud83d")) == "\ude00\ud83d"  # the other order is two lone surrogates


def _journal_round_trip(events: list[Any]) -> list[Any]:
    async def write(fd: int) -> None:
        async def inline(fn: Any, *args: Any) -> None:
            fn(*args)

        log = EventLog(fd, offload=inline)
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            for event in events:
                log.record(event)
            log.close()

    with tempfile.TemporaryFile() as file:
        trio.run(write, file.fileno())
        file.seek(0)
        data = file.read()
    data.decode("utf-8")  # the journal is valid UTF-8
    entries, _ = parse_journal(data)
    return [e.event for e in entries]


@settings(max_examples=60, deadline=None)
@given(JSON_TEXT)
def test_the_journal_stores_any_text_losslessly(text: str) -> None:
    events = [
        ItemSucceeded(step="s", item=text, index=0, result={"content": [{"type": "text", "text": text}], text: 1}),
        ItemFailed(step="s", item="k", kind="tool-error", error=text),
        LogMessage(server="s", level="warning", logger=text, data={"d": text}),
    ]
    assert _journal_round_trip(events) == events


def old_sha(item: Any) -> str:
    """How keys were hashed before lone surrogates were allowed (UTF-8, strict)."""
    text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@given(st.one_of(st.text(), st.lists(st.text()), st.dictionaries(st.text(), st.text())))
def test_keys_of_ordinary_text_did_not_change(item: Any) -> None:
    assert default_key(item, full_hash=True) == old_sha(item)
    assert default_key(item) in (item, "#" + old_sha(item)[:16])


@given(st.lists(JSON_TEXT.filter(lambda t: t != ""), unique=True, max_size=8))
def test_keys_of_any_text_never_raise_and_stay_apart(items: list[str]) -> None:
    keys = [default_key([item]) for item in items]
    assert len(set(keys)) == len(keys)
    assert default_key(["\ud800"]) == "#" + hashlib.sha256(b'["\xed\xa0\x80"]').hexdigest()[:16]


def test_fingerprints_of_ordinary_text_did_not_change() -> None:
    # computed by mcp-run before lone surrogates were allowed: runs it began still resume unchanged
    text = WORKFLOW.replace("args: {x: 1}", 'args: {x: "été ☃ 😀 ${{ inputs.n }}"}')
    pinned = {"a": "50cf564b61a636f4", "c": "ae57cf770d17f88a", "b": "9d54f183c668821f"}
    assert fingerprints(plan(text), {"pw": "a", "n": "Grüße"}) == pinned
    odd = fingerprints(plan(text), {"pw": "a", "n": "Grüße\ud800"})  # never raises, and tells them apart
    assert odd["a"] != pinned["a"] and odd["b"] != pinned["b"]


def test_utf8_passes_lone_surrogates_and_leaves_other_text_alone() -> None:
    assert utf8("été 😀") == "été 😀".encode()
    assert utf8("a\ud800") == b"a\xed\xa0\x80"


@given(JSON_TEXT)
def test_a_request_echoing_any_text_goes_out_and_reads_back(text: str) -> None:
    request = Request(id=1, method="tools/call", params={"name": "echo", "arguments": {"text": text}})
    wire = encode(request)
    wire.decode("utf-8")
    assert decode(wire) == [request]


def test_an_env_value_that_is_not_utf8_is_hashed_too() -> None:
    # os.environ gives undecodable bytes as lone low surrogates (surrogateescape)
    value = os.fsdecode(b"caf\xe9")
    assert default_key([value]).startswith("#")
