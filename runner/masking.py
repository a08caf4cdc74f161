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

**The journal's encoding: placeholders nobody else can write.** What is read back into values (a resume reads
results from the journal; a Temporal activity reads the arguments the workflow rendered) is *encoded*
(:meth:`Masker.encode`), not only masked: every ``***`` of the original text is written ``***=``, and only the
masker writes a ``***`` that is not followed by ``=``, in its placeholders ``***NAME***``. Decoding
(:meth:`Masker.decode`) reads the text left to right: ``***=`` is ``***`` again, ``***NAME***`` is the form it
stands for. So ``decode(encode(t)) == t`` for any text, and a text a server sent (or an input) that looks like a
placeholder is encoded as ``***=env.API_KEY***=`` and decodes to itself, never to a secret: a placeholder cannot
be forged. (Why it is exact: ``str.replace("***", "***=")`` replaces from the left, so in the escaped text
every ``***`` is followed by ``=`` and the stars left between two of them are at most two; a placeholder's
name holds no ``*`` and never starts with ``=``; so read from the left, every ``***`` followed by anything but
``=`` opens one of the masker's placeholders, and stars next to one never merge with it.) Text without
``***`` and without secrets is its own encoding: the hot path is one substring test per string.
:func:`shown` is the encoded text as a person reads it (``***=`` as ``***``, placeholders as they are): what
``show``, ``logs`` and ``export`` print. Journals before format 3 (``MARKED_FORMAT``) hold masked, not
encoded, text; they keep that meaning (:meth:`Masker.legacy_decode`: a placeholder the masker knows reads back
as its secret, whoever wrote it), and a resume goes on writing them in their format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from runner.errors import McpRunError, TransportError, UsageError

__all__ = [
    "ESCAPES",
    "MARK",
    "MARKED_FORMAT",
    "SHORT",
    "UNMASKED_FIELDS",
    "Masker",
    "check_secret_inputs",
    "decode_fields",
    "escape",
    "escape_value",
    "forms",
    "placeholder",
    "placeholders",
    "shown",
    "shown_fields",
    "shown_value",
]

SHORT = 3
"""Secrets (and forms of them) this long or shorter are masked only where a whole string equals them."""


MARK = "***"
"""How every placeholder starts; in encoded text an original ``***`` is written ``***=`` (see the module docstring)."""

_ESCAPED = MARK + "="

MARKED_FORMAT = 3
"""The first journal format whose text is encoded (``run_started.journal``); older journals hold masked text."""

# One token of encoded text: an escaped mark (no group), or a placeholder (its name in group 1).
_TOKEN = re.compile(r"\*\*\*(?:=|([^*=][^*]*)\*\*\*)")

# Fields that mcp-run itself fills (the record's frame, ids and names from the workflow, counts, vocabularies):
# never masked nor encoded, so a secret that happens to equal ``log`` or a timestamp's digits cannot break a
# record. Every other field (results, errors, log data, inputs, outputs, what a server says about itself) is
# masked and encoded, including any field added later, and decoded when read back. A fan-out item's key
# (``item``) is refused by the scheduler when it holds a secret, before any call.
UNMASKED_FIELDS: frozenset[str] = frozenset(
    {
        "seq", "ts", "type", "run_id", "workflow", "identity", "device", "inode", "workflow_hash", "fingerprints",
        "pid", "env", "journal", "keys", "decision",
        "allow_changed", "retry_failed", "server", "reconnects", "down_s", "attempt", "delay_s", "remaining_s",
        "kind", "step", "items", "reused", "fresh", "cause", "item", "index", "tool", "request_id",
        "progress_token", "progress", "total", "status", "counts", "exit_code", "retrying", "retry_in",
        "secret_inputs", "folded", "omitted", "cache", "reused_from", "verdict",
    }
)  # fmt: skip

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


def _name_in_placeholder(name: str) -> str:
    """``name`` as a placeholder can hold it: without ``*`` and not starting with ``=`` (a header may be named
    ``X-*``), percent-encoded, so that two names never share a placeholder."""
    if "*" not in name and "%" not in name and not name.startswith("="):
        return name
    name = name.replace("%", "%25").replace("*", "%2A")
    return "%3D" + name[1:] if name.startswith("=") else name


def placeholder(name: str) -> str:
    """The placeholder of secret (or form) ``name``: ``***env.TOKEN***``."""
    return f"{MARK}{name}{MARK}"


def escape(text: str) -> str:
    """``text`` encoded with no secret in it: each ``***`` written ``***=`` (the same string when it has none)."""
    return text.replace(MARK, _ESCAPED) if MARK in text else text


def shown(text: str) -> str:
    """Encoded ``text`` as a person reads it: each ``***=`` as ``***``, each placeholder as it is."""
    if MARK not in text:
        return text
    return _TOKEN.sub(lambda m: MARK if m.group(1) is None else m.group(0), text)


def placeholders(text: str) -> list[str]:
    """The names of the secrets whose placeholders encoded ``text`` holds (each once, suffix dropped:
    ``env.TOKEN`` for ``***env.TOKEN:json***``); never a name from escaped text."""
    if MARK not in text:
        return []
    names = (m.group(1) for m in _TOKEN.finditer(text) if m.group(1) is not None)
    return list(dict.fromkeys(name.partition(":")[0] for name in names))


def _walk(value: Any, text: Callable[[str], str]) -> Any:
    """``value`` with ``text`` applied to every string in it (dict keys too); numbers, booleans and null as
    they are; the same object when nothing changed."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return _walk_dict(value, text)
    if isinstance(value, list | tuple):
        items = [_walk(item, text) for item in value]
        if any(a is not b for a, b in zip(items, value, strict=True)):
            return items
    return value


def _walk_dict(value: dict[Any, Any], text: Callable[[str], str]) -> dict[Any, Any]:
    changed = False
    out: dict[Any, Any] = {}
    for key, item in value.items():
        new_key = text(key) if isinstance(key, str) else key
        new_item = _walk(item, text)
        changed = changed or new_key is not key or new_item is not item
        out[new_key] = new_item
    return out if changed else value


def _walk_fields(obj: dict[str, Any], keep: Iterable[str], text: Callable[[str], str]) -> dict[str, Any]:
    kept = keep if isinstance(keep, frozenset | set) else set(keep)
    out: dict[str, Any] = {}
    changed = False
    for key, value in obj.items():
        new = value if key in kept else _walk(value, text)
        changed = changed or new is not value
        out[key] = new
    return out if changed else obj


def escape_value(value: Any) -> Any:
    """``value`` encoded with no secret in it (:func:`escape` on every string)."""
    return _walk(value, escape)


def shown_value(value: Any) -> Any:
    """Encoded ``value`` as a person reads it (:func:`shown` on every string)."""
    return _walk(value, shown)


def shown_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """An encoded event object as a person reads it: every field but ``UNMASKED_FIELDS`` as :func:`shown`."""
    return _walk_fields(obj, UNMASKED_FIELDS, shown)


def decode_fields(obj: dict[str, Any], masker: Masker | None, *, journal: int) -> dict[str, Any]:
    """A journal object (of format ``journal``) as it was written, every field but ``UNMASKED_FIELDS``
    decoded: by ``masker`` (its placeholders back to the secrets: a resume), or as shown (``show``, ``logs``:
    placeholders kept). A journal before ``MARKED_FORMAT`` holds masked text: only a masker changes it."""
    if journal < MARKED_FORMAT:
        if masker is None:
            return obj
        return _walk_fields(obj, UNMASKED_FIELDS, masker.legacy_decode)
    return _walk_fields(obj, UNMASKED_FIELDS, masker.decode if masker is not None else shown)


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

    :meth:`mask` masks one text (what is printed); :meth:`mask_value` every string (keys included) in a
    JSON-like value; :meth:`scrub` an error's message and server stderr, in place. :meth:`encode` (and
    :meth:`encode_value`, :meth:`encode_fields`) masks and encodes what is read back later (the journal, a
    Temporal history); :meth:`decode` (:meth:`decode_value`) puts the values back. :meth:`secrets_in` names the
    secrets a text holds.
    """

    SHORT = SHORT

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._forms: dict[str, str] = {}  # form -> placeholder, matched inside text
        self._exact: dict[str, str] = {}  # short forms, matched whole
        self._pattern: re.Pattern[str] | None = None
        self._anchors: tuple[str, ...] = ()  # the first characters of every form: most texts hold none
        self._back: dict[str, str] = {}  # placeholder -> the form it stands for
        self._names: dict[str, str] = {}  # placeholder -> the secret's name
        self._back_pattern: re.Pattern[str] | None = None
        for name, value in (secrets or {}).items():
            self.add(name, value)

    def add(self, name: str, value: str) -> None:
        """Add secret ``name``, matched in all its forms."""
        if not isinstance(value, str):
            raise TypeError(f"secret {name} is not text but {type(value).__name__}")
        name = _name_in_placeholder(name)
        if value:
            self._add_text(name, value)
        else:  # nothing to mask, but its placeholder (a Temporal template's env.NAME) still reads back as ""
            self._back.setdefault(placeholder(name), "")
            self._names.setdefault(placeholder(name), name)

    def _add_text(self, name: str, value: str) -> None:
        for form, placeholder in forms(name, value):
            if not form.strip():
                continue
            target = self._exact if len(form) <= SHORT else self._forms
            target.setdefault(form, placeholder)
            self._back.setdefault(placeholder, form)
            self._names.setdefault(placeholder, name)
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

    def encode(self, text: str) -> str:
        """``text`` masked and encoded (see the module docstring): each form of each secret by its
        placeholder, each other ``***`` written ``***=``; the same string when it holds neither."""
        if MARK not in text:
            return self.mask(text)  # nothing to escape: the pieces between placeholders hold no mark
        exact = self._exact.get(text)
        if exact is not None:
            return exact
        if self._pattern is None:
            return text.replace(MARK, _ESCAPED)
        out: list[str] = []
        pos = 0
        for match in self._pattern.finditer(text):
            out += (escape(text[pos : match.start()]), self._forms[match.group(0)])
            pos = match.end()
        out.append(escape(text[pos:]))
        return "".join(out)

    def decode(self, text: str) -> str:
        """Encoded ``text`` as it was: ``***=`` as ``***``, each placeholder of this masker's as the form it
        stands for (a placeholder it does not know, of a secret no longer given, stays as it is)."""
        if MARK not in text:
            return text
        back = self._back
        return _TOKEN.sub(lambda m: MARK if m.group(1) is None else back.get(m.group(0), m.group(0)), text)

    def legacy_decode(self, text: str) -> str:
        """Masked text of a journal before ``MARKED_FORMAT`` as it was read then: every placeholder this masker
        knows replaced by its form (such a journal cannot tell a server's text from a placeholder)."""
        if MARK not in text or self._back_pattern is None:
            return text
        return self._back_pattern.sub(lambda m: self._back[m.group(0)], text)

    def secrets_in(self, text: str) -> list[str]:
        """The names of the secrets some form of which ``text`` holds (each once), as :meth:`mask` finds them."""
        exact = self._exact.get(text)
        if exact is not None:
            return [self._names[exact]]
        if self._pattern is None or not any(anchor in text for anchor in self._anchors):
            return []
        return list(dict.fromkeys(self._names[self._forms[m.group(0)]] for m in self._pattern.finditer(text)))

    def mask_value(self, value: Any) -> Any:
        """``value`` with every string in it masked (dict keys too); numbers, booleans and null as they are
        (their type is kept: see the module docstring); the same object when nothing needed masking."""
        return _walk(value, self.mask)

    def encode_value(self, value: Any) -> Any:
        """``value`` with every string in it encoded (:meth:`encode`), as :meth:`mask_value` masks them."""
        return _walk(value, self.encode)

    def decode_value(self, value: Any) -> Any:
        """Encoded ``value`` as it was (:meth:`decode` on every string)."""
        return _walk(value, self.decode)

    def mask_fields(self, obj: dict[str, Any], keep: Iterable[str]) -> dict[str, Any]:
        """``obj`` (one level of named fields) with every field but those in ``keep`` masked by
        :meth:`mask_value`; the same object when nothing needed masking."""
        return _walk_fields(obj, keep, self.mask)

    def encode_fields(self, obj: dict[str, Any], keep: Iterable[str]) -> dict[str, Any]:
        """``obj`` with every field but those in ``keep`` encoded (:meth:`encode_value`)."""
        return _walk_fields(obj, keep, self.encode)

    def scrub(self, error: BaseException) -> BaseException:
        """Mask, in place, what ``error`` will print: its message (and a stdio server's stderr tail, raw,
        before it is indented and cut); then the same for the errors it holds, its cause and its context.
        Returns ``error``."""
        seen: set[int] = set()
        todo: list[BaseException] = [error]
        while todo:
            current = todo.pop()
            if id(current) not in seen:
                seen.add(id(current))
                todo += self._scrub_one(current)
        return error

    def _scrub_one(self, error: BaseException) -> list[BaseException]:
        """Mask ``error``'s own text in place; returns the errors it holds (:func:`_held`), to be scrubbed next."""
        if isinstance(error, TransportError) and error.stderr:
            error.stderr = self.mask(error.stderr)
        error.args = tuple(self.mask_value(arg) for arg in error.args)
        if isinstance(error, McpRunError):
            for attr in ("message", "suggestion"):
                text = error.__dict__.get(attr)
                if isinstance(text, str):
                    setattr(error, attr, self.mask(text))
        return _held(error)


def _held(error: BaseException) -> list[BaseException]:
    """The errors ``error`` holds (a group's, a ``WorkflowError``'s list of problems), its cause and its context."""
    held = error.exceptions if isinstance(error, BaseExceptionGroup) else error.__dict__.get("errors")
    inner = [e for e in held or () if isinstance(e, BaseException)]
    return inner + [e for e in (error.__cause__, error.__context__) if e is not None]


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
