"""``did you mean ...?``: the names closest to a misspelt one, ranked by similarity.

Used for tool names (``get_time`` -> ``get_current_time``, not ``convert_time``), template names, keys,
inputs, steps and servers. A name is cut into words (``_``, ``-``, ``.``, camelCase, digits:
``getCurrentTime`` and ``get_current_time`` are both ``get current time``) and scored against each
candidate by two measures:

- **words**: how well the name's words are found among the candidate's (weighted twice: what the user
  wrote should be there), and the candidate's among the name's. Words match when equal, when one is a
  prefix of the other (``dir``, ``directory``), when they share most of a prefix (``entity``,
  ``entities``), or when they differ by a typo (``reed``, ``read``);
- **letters**: :class:`difflib.SequenceMatcher` on the words joined, raised when one name is contained
  in the other (``status`` in ``git_status``) or its letters appear in it in order (``gettime``).

The score is ``0.6 * words + 0.4 * letters`` (letters alone for two one-word names); candidates under
:data:`CUTOFF` are never suggested, and those within :data:`TIE` of the best are suggested together (at
most three): ``time`` -> ``'convert_time' or 'get_current_time'``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["CUTOFF", "TIE", "did_you_mean", "similar"]

CUTOFF: Final = 0.6
TIE: Final = 0.05

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_TYPO: Final = 0.75  # two words whose letters match at least this well are the same word misspelt


def similar(word: str, choices: Iterable[object], *, limit: int = 3) -> list[str]:
    """The choices closest to ``word``, best first: the best one and those within :data:`TIE` of it, at
    most ``limit``, none scoring under :data:`CUTOFF`."""
    words = _words(word)
    scored = sorted(
        ((score, name) for name in dict.fromkeys(str(c) for c in choices) if (score := _score(words, name)) >= CUTOFF),
        key=lambda pair: (-pair[0], pair[1]),
    )
    if not scored:
        return []
    best = scored[0][0]
    return [name for score, name in scored if score >= best - TIE][:limit]


def did_you_mean(word: str, choices: Iterable[object]) -> str | None:
    """``did you mean 'x'?`` (or ``'x' or 'y'``, ``'x', 'y' or 'z'`` when they score alike) for the choices
    closest to ``word``; None when nothing is close."""
    found = [repr(name) for name in similar(word, choices)]
    if not found:
        return None
    shown = found[0] if len(found) == 1 else ", ".join(found[:-1]) + " or " + found[-1]
    return f"did you mean {shown}?"


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)] or [name.lower()]


def _score(words: list[str], name: str) -> float:
    theirs = _words(name)
    letters = _letters(words, theirs)
    if len(words) == 1 and len(theirs) == 1:
        return letters
    found = sum(max(_word_match(w, t) for t in theirs) for w in words) / len(words)
    kept = sum(max(_word_match(t, w) for w in words) for t in theirs) / len(theirs)
    return 0.6 * (2 * found + kept) / 3 + 0.4 * letters


def _letters(words: list[str], theirs: list[str]) -> float:
    ratio = difflib.SequenceMatcher(None, "_".join(words), "_".join(theirs)).ratio()
    short, long = sorted(("".join(words), "".join(theirs)), key=len)
    if short and short in long:
        return max(ratio, 0.5 + 0.5 * len(short) / len(long))
    if short and _in_order(short, long):
        return max(ratio, 0.4 + 0.5 * len(short) / len(long))
    return ratio


def _word_match(a: str, b: str) -> float:
    if a == b:
        return 1.0
    short, long = sorted((a, b), key=len)
    if len(short) >= 3 and long.startswith(short):
        return 0.6 + 0.4 * len(short) / len(long)
    ratio = difflib.SequenceMatcher(None, a, b).ratio()
    shared = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(short))
    if shared >= 4 and shared >= 0.6 * len(short):
        ratio = max(ratio, 0.6 + 0.4 * shared / len(long))
    return ratio if ratio >= _TYPO else 0.0


def _in_order(short: str, long: str) -> bool:
    """Whether the letters of ``short`` appear in ``long`` in the same order."""
    rest = iter(long)
    return all(ch in rest for ch in short)
