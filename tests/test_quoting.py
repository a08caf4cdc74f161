"""Quoting a value into a message: masked whole by the run's masking, then cut."""

from __future__ import annotations

import trio

from runner.masking import Masker
from runner.quoting import cut, masked, masking, quote
from runner.session.text import QUOTE_CHARS
from runner.session.text import quote as quote_stray

SECRET = "sk-" + "0123456789abcdef" * 16  # 259 characters: longer than any cut


def test_without_masking_a_value_is_only_cut() -> None:
    assert quote("x" * 50) == repr("x" * 37 + "...") and cut("short") == "short" and masked(SECRET) == SECRET


def test_a_secret_is_masked_whole_before_it_is_cut_never_shown_in_part() -> None:
    masker = Masker({"env.KEY": SECRET, "env.PIN": "42"})
    with masking(masker.mask):
        assert quote(SECRET) == "'***env.KEY***'"
        assert quote("42") == "'***env.PIN***'"  # short, but the whole value: masked
        assert cut("Bearer " + SECRET + " and more" * 20).startswith("Bearer ***env.KEY*** and more")
        # A server's stray line is quoted the same way: masked, then cut.
        assert quote_stray(("echo " + SECRET).encode()) == '"echo ***env.KEY***"'
        assert SECRET[:QUOTE_CHARS] not in quote_stray((SECRET * 2).encode())
    assert quote(SECRET) != "'***env.KEY***'"  # the masking ends with its block


async def test_tasks_started_inside_inherit_the_masking() -> None:
    got: list[str] = []
    with masking(Masker({"env.KEY": SECRET}).mask):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _quote_into(got))
    assert got == ["'***env.KEY***'"]


async def _quote_into(got: list[str]) -> None:
    await trio.lowlevel.checkpoint()
    got.append(quote(SECRET))
