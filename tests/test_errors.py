"""How errors read: a server's stderr tail on lines of its own, safe to print."""

from __future__ import annotations

from runner.errors import STDERR_LINE_CHARS, STDERR_TAIL_LINES, ConnectFailed, OutcomeUnknown, printable


def test_the_stderr_tail_follows_the_message_one_line_each() -> None:
    stderr = "Traceback (most recent call last):\n  boom\nValueError: x\n"
    error = OutcomeUnknown("docs: connection lost", stderr=stderr)
    assert str(error).splitlines() == [
        "docs: connection lost",
        "  server stderr (last lines):",
        "    Traceback (most recent call last):",
        "      boom",
        "    ValueError: x",
    ]
    assert str(error).split("\n", 1)[0] == "docs: connection lost"  # what one-line displays show


def test_the_stderr_tail_keeps_the_last_lines_without_blanks_and_cuts_long_ones() -> None:
    lines = [f"line {i}" for i in range(30)] + ["", "   ", "x" * 1000, "\r\n"]
    text = str(ConnectFailed("could not initialize", stderr="\n".join(lines)))
    shown = text.splitlines()[2:]
    assert len(shown) == STDERR_TAIL_LINES
    assert shown[0] == "    line 21"
    assert shown[-1] == "    " + "x" * (STDERR_LINE_CHARS - 1) + "…"


def test_no_stderr_no_tail() -> None:
    assert str(ConnectFailed("could not initialize", stderr="")) == "could not initialize"
    assert str(ConnectFailed("could not initialize", stderr="\n \n")) == "could not initialize"


def test_control_characters_in_stderr_cannot_drive_the_terminal() -> None:
    error = ConnectFailed("x", stderr="\x1b[31mERROR\x1b[0m disk full\rok\u202eevil\tend")
    assert str(error).splitlines()[2:] == ["    \\x1b[31mERROR\\x1b[0m disk full", "    ok\\u202eevil\tend"]


def test_printable_escapes_only_what_must_be() -> None:
    assert printable("café ✓ tab\there") == "café ✓ tab\there"
    assert printable("a\nb\rc\x00d\x7fe\x9bf") == "a\\nb\\rc\\x00d\\x7fe\\x9bf"
    assert printable("non\u00a0breaking") == "non\u00a0breaking"
