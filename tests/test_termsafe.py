"""Text from servers on a terminal (:mod:`runner.termsafe`): control characters shown as escapes, never sent."""

from __future__ import annotations

import io
import unicodedata
from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from runner.cli.servers import shown_result
from runner.engine.core.events import Entry, ItemFailed, LogMessage
from runner.engine.core.state import RunState
from runner.termsafe import encodable, terminal
from runner.view.live import LiveView
from runner.view.plain import PlainView
from tests.support import TS, entry

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

ODD = "odd\ud800 \x1b]0;pwned\x07title \x1b[2Jclear \x9b31mred\r\x08 \u202egnp.exe\x7f"


def forbidden(ch: str) -> bool:
    """What must never reach a terminal: C0 but tab and newline, DEL, C1, a lone surrogate."""
    code = ord(ch)
    return (code < 0x20 and ch not in "\t\n") or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF


def is_bidi(ch: str) -> bool:
    return 0x202A <= ord(ch) <= 0x202E or 0x2066 <= ord(ch) <= 0x2069


def expected_escape(ch: str) -> str:
    return "\\r" if ch == "\r" else f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def test_escape_sequences_are_shown_not_sent() -> None:
    assert terminal(ODD) == ("odd\\ud800 \\x1b]0;pwned\\x07title \\x1b[2Jclear \\x9b31mred\\r\\x08 \\u202egnp.exe\\x7f")


def test_tabs_newlines_and_ordinary_text_stay() -> None:
    text = "été\tcafé ☃ 😀 日本語\nline two\\x1b (already an escape) "
    assert terminal(text) == text
    plain = "nothing to escape"
    assert terminal(plain) is plain


@given(ANY_TEXT)
def test_the_neutralised_form_holds_no_control_character(text: str) -> None:
    shown = terminal(text)
    assert not any(forbidden(ch) for ch in shown)
    shown.encode("utf-8")  # never raises: no surrogate left
    assert terminal(shown) == shown  # escaping twice changes nothing
    # character by character: a forbidden one (or a bidi control) as its escape, any other as it is
    assert shown == "".join(expected_escape(ch) if forbidden(ch) or is_bidi(ch) else ch for ch in text)


@given(ANY_TEXT)
def test_encodable_only_escapes_lone_surrogates(text: str) -> None:
    out = encodable(text)
    out.encode("utf-8")
    if not any(unicodedata.category(ch) == "Cs" for ch in text):
        assert out == text


def test_the_plain_view_escapes_what_a_server_sent() -> None:
    stream = io.StringIO()
    view = PlainView(stream, RunState())
    view.observe(Entry(1, TS, LogMessage(server="s", level="warning", logger="l\x1b[2J", data=ODD)))
    error = f"tool said {ODD}\n  server stderr (last lines):\n    {ODD}"
    view.observe(Entry(2, TS, ItemFailed(step="a", item="k\x1b]0;t\x07", kind="tool-error", error=error)))
    view.close()
    written = stream.getvalue()
    assert "\x1b" not in written and "\x9b" not in written and "\r" not in written and "\ud800" not in written
    assert "log warning s (l\\x1b[2J): odd\\ud800 \\x1b]0;pwned\\x07title" in written
    assert "error a[k\\x1b]0;t\\x07]: tool error: tool said odd\\ud800" in written


async def test_the_live_view_escapes_what_a_server_sent(autojump_clock: trio.testing.MockClock) -> None:
    console = Console(file=io.StringIO(), width=200, force_terminal=True, color_system=None)
    view = LiveView(io.StringIO(), RunState(), steps=["a"], log_level="info", console=console, clock=trio.current_time)
    events: list[dict[str, Any]] = [
        {"type": "step_started", "step": "a", "items": 2},
        {"type": "item_dispatched", "step": "a", "item": "k\x1b[2J"},
        {"type": "progress", "step": "a", "item": "k\x1b[2J", "progress": 1, "message": f"working {ODD}"},
        {"type": "log", "server": "s", "level": "warning", "data": f"log {ODD}"},
        {"type": "item_failed", "step": "a", "item": "k\x1b[2J", "kind": "tool-error", "error": f"bad {ODD}"},
    ]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.run)
        for n, fields in enumerate(events, start=1):
            e = entry(fields, seq=n)
            view.state.apply(e)
            view.observe(e)
            await trio.sleep(0.5)  # a redraw between events: the progress message is drawn
        view.close()
    text = console.file.getvalue()  # type: ignore[attr-defined]
    # the view's own cursor movements are there; the server's sequences are not
    assert "\x1b]0;" not in text and "\x1b[2J" not in text and "\x9b" not in text and "\ud800" not in text
    assert "working odd\\ud800 \\x1b]0;pwned\\x07title" in text
    assert "log warning s: log odd\\ud800 \\x1b]0;pwned" in text
    assert "error a[k\\x1b[2J]: tool error: bad odd\\ud800" in text


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_call_escapes_its_result_on_a_terminal_and_keeps_it_for_a_pipe() -> None:
    assert shown_result(ODD, _Terminal()) == terminal(ODD)
    assert shown_result(ODD, io.StringIO()) == ODD.replace("\ud800", "\\ud800")
