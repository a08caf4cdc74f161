"""Secrets replaced by named placeholders (``***env.API_TOKEN***``) before anything is written or printed.

A secret can reach an output in more shapes than its raw text, so :class:`Masker` matches each of them, and
names each with its own placeholder, so that a resume can put back exactly what was there:

- the raw value: ``***env.TOKEN***``;
- JSON-escaped, as it stands inside a JSON string a server sent or a template built: ``***env.TOKEN:json***``
  (``json.dumps(v)[1:-1]``), and with non-ASCII escaped too (``:ascii``);
- as Python writes it inside quotes (``repr``: a schema checker's message): ``***env.TOKEN:repr***``;
- escaped again, up to ``ESCAPES`` (3) times in all (JSON inside JSON: ``***env.TOKEN:json-json***``);
- each line of a multi-line secret, stripped, when it is longer than ``SHORT``: ``***env.TOKEN:line2***``
  (and its escaped forms), so a text cut into lines and re-indented shows none of it.

A form of ``SHORT`` (3) characters or fewer is never matched inside text: every ``1`` of a journal would be
garbled. A short secret is replaced only where a whole string equals it. That suits values that are secrets
only by caution (``DEBUG=1``, read through ``env``); an input declared ``secret: true`` must be longer
(:func:`check_secret_inputs`). A secret is text: an input declared ``secret: true`` must be of type string.

Masking never changes a value's JSON type: numbers, booleans and null are left as they are (a number whose
digits hold a secret, ``PORT=8080`` in ``18080``, is not masked). A resume reads back what the journal holds,
so a result turned from a number into a masked string would come back as a string, and a fan-out over it
would key its items differently and call them again.

Text is masked before it is formatted: callers mask values (:meth:`Masker.mask_value`) before serializing
them, and the raw text of an error (:meth:`Masker.scrub`) before it is indented or cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from runner.errors import McpRunError, TransportError, UsageError

__all__ = ["ESCAPES", "SHORT", "Masker", "check_secret_inputs", "forms"]

SHORT = 3
"""Secrets (and forms of them) this long or shorter are masked only where a whole string equals them."""


ESCAPES = 3
"""How many times over a secret's escaped forms are matched: a value JSON-interpolated into an argument
(``"v=${{ [env.X] }}"``), echoed by a server as JSON and interpolated again is escaped three times."""

_ESCAPERS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("json", lambda text: json.dumps(text, ensure_ascii=False)[1:-1]),
    ("ascii", lambda text: json.dumps(text)[1:-1]),
    ("repr", lambda text: repr(text)[1:-1]),
)


def _variants(text: str) -> list[tuple[str, str]]:
    """(suffix, form) of ``text``: raw, then escaped by JSON (as is and ASCII) and ``repr``, one after the
    other up to ``ESCAPES`` times (``:json``, ``:json-repr``, ...); each form once, with its shortest suffix."""
    out: dict[str, str] = {text: ""}
    level = [("", text)]
    for _ in range(ESCAPES):
        following = []
        for suffix, form in level:
            for name, escape in _ESCAPERS:
                escaped = escape(form)
                if escaped not in out:
                    out[escaped] = f"{suffix}-{name}" if suffix else f":{name}"
                    following.append((out[escaped], escaped))
        level = following
    return [(suffix, form) for form, suffix in out.items()]


def forms(name: str, value: str) -> list[tuple[str, str]]:
    """(form, placeholder) of secret ``name`` whose text is ``value``: the shapes listed in the module
    docstring, each text once (a value without quotes, backslashes, newlines or non-ASCII has one form)."""
    out: dict[str, str] = {}
    for suffix, text in _variants(value):
        out.setdefault(text, f"***{name}{suffix}***")
    lines = value.splitlines()
    if len(lines) > 1 or (lines and lines[0] != value):
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if len(line) > SHORT:
                for suffix, text in _variants(line):
                    out.setdefault(text, f"***{name}:line{number}{suffix}***")
    return list(out.items())


class Masker:
    """Replaces secret values by named placeholders, and back (see the module docstring).

    :meth:`mask` masks one text; :meth:`mask_value` every string (keys included) in a JSON-like value;
    :meth:`scrub` an error's message and server stderr, in place; :meth:`unmask` puts the values back in a
    serialized line (a resume).
    """

    SHORT = SHORT

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._forms: dict[str, str] = {}  # form -> placeholder, matched inside text
        self._exact: dict[str, str] = {}  # short forms, matched whole
        self._pattern: re.Pattern[str] | None = None
        self._anchors: tuple[str, ...] = ()  # the first characters of every form: most texts hold none
        self._back: dict[str, str] = {}  # placeholder -> the JSON-escaped form it stands for
        self._back_pattern: re.Pattern[str] | None = None
        for name, value in (secrets or {}).items():
            self.add(name, value)

    def add(self, name: str, value: str) -> None:
        """Add secret ``name``, matched in all its forms."""
        if not isinstance(value, str):
            raise TypeError(f"secret {name} is not text but {type(value).__name__}")
        if value:
            self._add_text(name, value)

    def _add_text(self, name: str, value: str) -> None:
        for form, placeholder in forms(name, value):
            if not form.strip():
                continue
            target = self._exact if len(form) <= SHORT else self._forms
            target.setdefault(form, placeholder)
            self._back.setdefault(placeholder, json.dumps(form, ensure_ascii=False)[1:-1])
        longest_first = sorted(self._forms, key=len, reverse=True)
        self._anchors = tuple(dict.fromkeys(form[: SHORT + 1] for form in self._forms))
        # The lookahead on the forms' first characters makes the search skip, at little cost, every place
        # where no form starts; the forms themselves are tried, longest first, only where one may.
        ahead = "|".join(map(re.escape, self._anchors))
        alternatives = "|".join(map(re.escape, longest_first))
        self._pattern = re.compile(f"(?=(?:{ahead}))(?:{alternatives})") if longest_first else None
        back = sorted(self._back, key=len, reverse=True)
        self._back_pattern = re.compile("|".join(map(re.escape, back)))

    def __bool__(self) -> bool:
        return bool(self._forms or self._exact)

    def mask(self, text: str) -> str:
        """``text`` with every form of every secret replaced; a short secret only when it is all of ``text``."""
        exact = self._exact.get(text)
        if exact is not None:
            return exact
        if self._pattern is None or not any(anchor in text for anchor in self._anchors):
            return text
        return self._pattern.sub(lambda m: self._forms[m.group(0)], text)

    def mask_value(self, value: Any) -> Any:
        """``value`` with every string in it masked (dict keys too); numbers, booleans and null as they are
        (their type is kept: see the module docstring); the same object when nothing needed masking."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            changed = False
            out: dict[Any, Any] = {}
            for key, item in value.items():
                new_key = self.mask(key) if isinstance(key, str) else key
                new_item = self.mask_value(item)
                changed = changed or new_key is not key or new_item is not item
                out[new_key] = new_item
            return out if changed else value
        if isinstance(value, list | tuple):
            items = [self.mask_value(item) for item in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                return items
            return value
        return value

    def mask_fields(self, obj: dict[str, Any], keep: Iterable[str]) -> dict[str, Any]:
        """``obj`` (one level of named fields) with every field but those in ``keep`` masked by
        :meth:`mask_value`; the same object when nothing needed masking."""
        kept = set(keep)
        out: dict[str, Any] = {}
        changed = False
        for key, value in obj.items():
            new = value if key in kept else self.mask_value(value)
            changed = changed or new is not value
            out[key] = new
        return out if changed else obj

    def scrub(self, error: BaseException) -> BaseException:
        """Mask, in place, what ``error`` will print: its message (and a stdio server's stderr tail, raw,
        before it is indented and cut); then the same for the errors it holds, its cause and its context.
        Returns ``error``."""
        seen: set[int] = set()
        todo: list[BaseException] = [error]
        while todo:
            current = todo.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            if isinstance(current, TransportError) and current.stderr:
                current.stderr = self.mask(current.stderr)
            current.args = tuple(self.mask_value(arg) for arg in current.args)
            if isinstance(current, McpRunError):
                for attr in ("message", "suggestion"):
                    text = current.__dict__.get(attr)
                    if isinstance(text, str):
                        setattr(current, attr, self.mask(text))
            held = current.__dict__.get("errors")  # a WorkflowError's list of problems
            if isinstance(current, BaseExceptionGroup):
                held = current.exceptions
            todo += [inner for inner in held or () if isinstance(inner, BaseException)]
            todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        return error

    def unmask(self, text: str) -> str:
        """Re-expand placeholders in a serialized line (they only ever stand inside JSON strings, so each is
        replaced by the JSON-escaped text of the form it stands for)."""
        if "***" not in text or self._back_pattern is None:
            return text
        return self._back_pattern.sub(lambda m: self._back[m.group(0)], text)


def check_secret_inputs(secrets: Mapping[str, str]) -> None:
    """Refuse an input declared ``secret: true`` whose value is ``SHORT`` characters or fewer: it could be
    masked only where a whole value equals it, never inside text, and a secret input must never be printed.
    (Its type is string: :class:`~runner.workflow.model.Input` refuses ``secret: true`` on any other.)"""
    for name, text in secrets.items():
        if not name.startswith("inputs."):
            continue
        if text and len(text) <= SHORT:
            raise UsageError(
                f"input {name.removeprefix('inputs.')} is secret but its value has {len(text)} "
                f"character{'s' if len(text) != 1 else ''}: mcp-run can mask a secret inside text only when it "
                f"is longer than {SHORT} characters (a shorter one would hide every match of it in every "
                "message); give a longer value, or declare the input without `secret: true`"
            )
