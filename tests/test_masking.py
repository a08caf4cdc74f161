"""The masker: every shape a secret can take in an output, short secrets, typed ones, errors, and the way back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.engine.core.events import LogMessage, SessionOpened, encode
from runner.engine.journal.writer import UNMASKED_FIELDS, EventLog
from runner.errors import ConnectFailed, UsageError, WorkflowError
from runner.masking import Masker, check_secret_inputs, decode_fields, escape, forms, placeholders, shown

QUOTED = 'pa"ss\\word-é'


def test_each_form_of_a_secret_has_its_own_placeholder() -> None:
    masker = Masker({"env.T": QUOTED})
    raw, escaped, ascii_escaped, by_repr = QUOTED, json.dumps(QUOTED)[1:-1], json.dumps(QUOTED)[1:-1], repr(QUOTED)
    escaped = json.dumps(QUOTED, ensure_ascii=False)[1:-1]
    assert masker.mask(f"a {raw} b") == "a ***env.T*** b"
    assert masker.mask(f'{{"v": "{escaped}"}}') == '{"v": "***env.T:json***"}'
    assert masker.mask(ascii_escaped) == "***env.T:ascii***"
    assert masker.mask(f"got {by_repr}") == "got '***env.T:repr***'"
    # The way back: each placeholder of the encoded text becomes the text it stood for.
    for text in (raw, escaped, ascii_escaped, by_repr):
        line = json.dumps({"t": f"<{text}>"}, ensure_ascii=False)
        encoded = masker.encode_value(json.loads(line))
        assert "word" not in json.dumps(encoded, ensure_ascii=False)
        assert masker.decode_value(encoded) == {"t": f"<{text}>"}


def test_a_multi_line_secret_is_masked_line_by_line_once_cut_and_reindented() -> None:
    secret = "-----BEGIN KEY-----\r\nMIIEpAIBAAKCAQEA\n  x\n-----END KEY-----\n"
    masker = Masker({"inputs.key": secret})
    assert masker.mask(f"key: {secret}") == "key: ***inputs.key***"
    reindented = "\n".join("    " + line.strip() for line in secret.splitlines())
    shown = masker.mask(reindented)
    assert "BEGIN" not in shown and "MIIE" not in shown and "END" not in shown
    assert "***inputs.key:line2***" in shown and "    x" in shown  # a line of 3 characters or fewer is not masked
    assert [p for _, p in forms("inputs.key", "one line")] == ["***inputs.key***"]


def test_a_short_secret_is_masked_only_where_a_whole_value_equals_it() -> None:
    masker = Masker({"env.DEBUG": "1", "env.PORT": "8080"})
    assert masker.mask_value({"a": "1", "b": "x1", "c": 1, "d": [1, "1"]}) == {
        "a": "***env.DEBUG***",
        "b": "x1",
        "c": 1,
        "d": [1, "***env.DEBUG***"],
    }
    # Masking keeps every value's type: a number is never masked, even one whose digits hold a secret (a
    # resume reads back what the journal holds; a number turned into text would key a fan-out differently).
    assert masker.mask_value({"port": 8080, "n": 180801, "ok": True, "text": "on 8080"}) == {
        "port": 8080,
        "n": 180801,
        "ok": True,
        "text": "on ***env.PORT***",
    }


def test_a_secret_is_text() -> None:
    with pytest.raises(TypeError, match=r"secret inputs\.pin is not text but int"):
        Masker({"inputs.pin": 123456})  # type: ignore[dict-item]


def test_a_secret_input_too_short_to_mask_in_text_is_refused() -> None:
    with pytest.raises(UsageError, match="input pin is secret but its value has 3 characters"):
        check_secret_inputs({"inputs.pin": "123"})
    check_secret_inputs({"inputs.pin": "1234", "env.DEBUG": "1", "inputs.empty": ""})


def test_an_error_is_scrubbed_in_place_stderr_before_it_is_formatted() -> None:
    secret = "tab\tinside\nsecond-line"
    masker = Masker({"env.T": secret})
    error = ConnectFailed(f"could not start ({secret!r})", stderr=f"Traceback\n  token={secret}\nValueError\n")
    assert "\\tinside" in str(error)  # the tail shows the tab escaped: matched after formatting, it would leak
    masker.scrub(error)
    text = str(error)
    assert "inside" not in text and "second-line" not in text
    # (repr and JSON escape this one alike: one placeholder for both)
    assert "token=***env.T***" in text and "could not start ('***env.T:json***')" in text
    wrapped = WorkflowError(f"bad value {secret}", suggestion=f"not {secret}")
    outer = RuntimeError("outer")
    outer.__cause__ = wrapped
    masker.scrub(outer)
    assert "inside" not in str(wrapped) and str(wrapped) == "bad value ***env.T***\n  hint: not ***env.T***"


def test_events_are_masked_except_the_fields_mcp_run_fills() -> None:
    seen: list[dict[str, object]] = []
    log = EventLog(None, masker=Masker({"env.LEVEL": "info", "env.T": "s3cr3t-x"}))
    log.subscribe(lambda entry: seen.append(encode(entry)))
    # A secret equal to a word mcp-run writes itself cannot break the record (its fields' names stay).
    log.record(SessionOpened(server="info", protocol_version="info", server_info={"name": "s3cr3t-x", "v": "info"}))
    log.record(LogMessage(server="s", level="info", data={"info": "s3cr3t-x"}))
    assert seen[0]["server"] == "info" and seen[0]["protocol_version"] == "***env.LEVEL***"
    assert seen[0]["server_info"] == {"name": "***env.T***", "v": "***env.LEVEL***"}
    assert seen[1]["type"] == "log" and seen[1]["data"] == {"***env.LEVEL***": "***env.T***"}
    assert {"ts", "type", "step", "item", "status"} <= UNMASKED_FIELDS and "error" not in UNMASKED_FIELDS


ALPHABET = st.sampled_from(['"', "\\", "\n", "\t", "{", "}", ":", ",", "é", "😀", "\u2028", "a", "Z", " ", "'", "/"])


def leaks(secret: str, text: str) -> list[str]:
    """The forms of ``secret`` found in ``text``: raw, JSON-escaped (as is and ASCII) and each line longer
    than 3 characters (stripped), raw and JSON-escaped."""
    lines = [line.strip() for line in secret.splitlines()]
    shapes = [secret] + [line for line in lines if len(line) > Masker.SHORT]
    found = []
    for shape in shapes:
        for form in (shape, json.dumps(shape, ensure_ascii=False)[1:-1], json.dumps(shape)[1:-1]):
            if form in text:
                found.append(form)
    return found


@given(st.text(ALPHABET, min_size=2, max_size=20).map(lambda t: "§" + t + "§"))
def test_no_form_of_a_secret_survives_encoding_and_decoding_restores_it(secret: str) -> None:
    masker = Masker({"env.S": secret})
    samples = [
        f"x {secret} y",
        json.dumps({"v": secret}, ensure_ascii=False),
        json.dumps({"v": secret}),
        repr({"v": secret}),
        "\n".join("  " + line.strip() for line in secret.splitlines()),
    ]
    for sample in samples:
        masked = masker.encode(sample)
        assert leaks(secret, masked) == []
        assert masker.decode(masked) == sample


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@given(
    value=JSON_VALUES,
    secret=st.sampled_from(["8080", "1234567", "true", "null", "0.5", "-12", "e10", "sk-live-1"]),
    at=st.sampled_from(["", "1", "x{}y", "{}0"]),
)
def test_a_resume_reads_back_exactly_what_was_recorded(value: object, secret: str, at: str) -> None:
    """A journal line is masked, then unmasked when a resume reads it: the value, its types included, comes
    back exactly (a number turned into masked text came back as a string, and a fan-out over it keyed its
    items differently and called them again)."""
    masker = Masker({"env.S": secret})
    planted = [value, at.replace("{}", secret) if at else secret]
    if at.replace("{}", secret).lstrip("-").replace(".", "", 1).isdigit():
        planted.append(json.loads(at.replace("{}", secret)))  # the secret's digits inside a number
    line = json.dumps(masker.encode_value({"v": planted}), ensure_ascii=False)
    assert masker.decode_value(json.loads(line)) == {"v": planted}


# -- the encoding: placeholders nobody else can write ---------------------------------------------------------

PIECES = st.sampled_from(
    [
        *("*", "**", "***", "=", "***=", "***env.S***", "***env.S:json***", "***env.T***=", "env.S"),
        *(":", ".", "a", "Z", '"', "\\", "\n", " ", "é"),
    ]
)
TEXTS = st.lists(PIECES, max_size=12).map("".join)
SECRET_VALUES = st.lists(
    st.sampled_from(["*", "=", "a", "b", '"', "\\", "\n", "§", "***"]), min_size=1, max_size=8
).map("".join)


@given(text=TEXTS, secrets=st.dictionaries(st.sampled_from(["env.S", "env.T", "inputs.pw"]), SECRET_VALUES))
def test_decoding_an_encoding_gives_back_the_text_whatever_it_holds(text: str, secrets: dict[str, str]) -> None:
    """``decode(encode(t)) == t`` for any text and any secrets, placeholder-like text, marks and secrets that
    hold ``*`` included; what is shown is what masking prints."""
    masker = Masker(secrets)
    for sample in (text, *(text + value + text for value in secrets.values())):
        encoded = masker.encode(sample)
        assert masker.decode(encoded) == sample
        assert shown(encoded) == masker.mask(sample)
        value = {sample: [sample, 1, None]}
        assert masker.decode_value(masker.encode_value(value)) == value


@given(text=TEXTS, secrets=st.dictionaries(st.sampled_from(["env.S", "env.T"]), SECRET_VALUES, min_size=1))
def test_a_text_that_held_no_secret_decodes_to_itself_placeholder_like_or_not(
    text: str, secrets: dict[str, str]
) -> None:
    """Unforgeable: a text in which the masker found no secret (a server's ``***env.S***`` included) is
    encoded with no placeholder, and decodes to itself, never to a secret."""
    masker = Masker(secrets)
    if masker.secrets_in(text):
        return
    encoded = masker.encode(text)
    assert encoded == escape(text) and placeholders(encoded) == []
    assert masker.decode(encoded) == text


def test_a_placeholder_a_server_writes_reads_back_as_that_text() -> None:
    masker = Masker({"env.S": "sk-live-123456"})
    for forged in ("***env.S***", "***env.S:json***", "x***env.S***y", "******env.S******", "***=env.S***="):
        encoded = masker.encode(forged)
        assert masker.decode(encoded) == forged and placeholders(encoded) == []
    # The masker's own placeholder, next to a server's stars, still reads back as the secret.
    assert masker.decode(masker.encode("**sk-live-123456***")) == "**sk-live-123456***"
    assert placeholders(masker.encode("a sk-live-123456 b")) == ["env.S"]


def test_text_without_a_mark_or_a_secret_is_its_own_encoding() -> None:
    masker, text = Masker({"env.S": "sk-live-123456"}), "plain text, *stars* and ** two"
    assert masker.encode(text) is text and Masker().encode(text) is text and escape(text) is text
    value = {"a": [text, 1]}
    assert masker.encode_value(value) is value


def test_a_journal_before_format_3_keeps_its_meaning() -> None:
    """Format 2 wrote masked text: its placeholders read back as the secrets (as they did then), and ``***=``
    is text; a display shows it as it is."""
    masker = Masker({"env.S": "sk-live-123456"})
    obj = {"type": "log", "server": "s", "data": "***env.S*** and ***=x"}
    assert decode_fields(obj, masker, journal=2)["data"] == "sk-live-123456 and ***=x"
    assert decode_fields(obj, None, journal=2) is obj
    assert decode_fields(obj, masker, journal=3)["data"] == "sk-live-123456 and ***x"
    assert decode_fields(obj, None, journal=3)["data"] == "***env.S*** and ***x"


def test_secrets_in_names_the_secrets_as_the_masker_finds_them() -> None:
    masker = Masker({"env.S": 'sk"live', "env.DEBUG": "1"})
    assert masker.secrets_in('key-sk"live') == ["env.S"]
    assert masker.secrets_in(json.dumps('sk"live')) == ["env.S"]  # its JSON form
    assert masker.secrets_in("1") == ["env.DEBUG"] and masker.secrets_in("x1") == []
    assert masker.secrets_in("***env.S***") == []  # text that looks like a placeholder holds no secret


def test_a_name_a_placeholder_cannot_hold_is_percent_encoded() -> None:
    """A header may be named ``X-*``: its placeholder must still be one (no ``*`` in it, no ``=`` first), and
    two names never share one."""
    masker = Masker({"servers.s.headers.X-*": "sk-live-1", "servers.s.headers.X-%2A": "sk-live-2", "=x": "sk-live-3"})
    encoded = masker.encode("sk-live-1 sk-live-2 sk-live-3")
    assert encoded == "***servers.s.headers.X-%2A*** ***servers.s.headers.X-%252A*** ***%3Dx***"
    assert masker.decode(encoded) == "sk-live-1 sk-live-2 sk-live-3"
