"""YAML bytes -> text -> nodes, within limits that no real workflow reaches and every YAML bomb crosses.

Entry points::

    read_text(path, what, limits) -> str        the file's bytes as UTF-8 text; refuses what is no regular
                                                 file (a FIFO would wait for a writer), a file too large
                                                 before parsing it, bad UTF-8 with its line and column
    check_text(text, what, file, limits)         the same checks for text given as a string
    compose(text, file, limits, fast) -> Node    one document's nodes (None when the file is empty)

A :class:`YamlLimits` caps, for every file mcp-run reads as YAML (workflows and ``--inputs-file``):

* **bytes** (``max_bytes``, 10 MB): checked before parsing;
* **values after alias expansion** (``max_values``, 2,000,000): every scalar, list and mapping counts, and an
  alias counts everything its anchor holds, each time it appears. So a "billion laughs" (an anchor of nine
  aliases of an anchor of nine aliases...) is refused at the alias that crosses the limit, while the
  document is composed: nothing is expanded to measure it, and nothing after the loader ever walks a tree
  larger than the limit;
* **depth** (``max_depth``, 100 levels, aliases expanded): ``[[[[...`` is an error, never a RecursionError;
* **one string** (``max_string``, a million characters): a value that large is data, better read from a file;
* **characters after alias expansion** (``max_chars``, 10,000,000): the text of every scalar (keys included),
  an alias counting all the text its anchor holds, each time it appears. Written out, a document within
  ``max_bytes`` is within it (a character is at least a byte); an alias of a megabyte string, repeated, is
  not: each alias would be another megabyte in memory, in every rendered argument and in the journal. Like
  the value limit, it is checked at the alias that crosses it, without expanding anything.

The largest shipped workflow (``workflows/shout_copies.yaml``) is 2.5 kB, 99 values and 5 levels deep: the
limits leave it 4,000 times the size, 20,000 times the values and 20 times the depth. Generated workflows
are larger: 60,000 steps of five arguments each are 9.4 MB and 1,080,000 values; the 60,000-step chain of
``tests/benchmarks/steps.py`` is 6.5 MB and 720,000 values. Written-out values are bounded by the bytes as
well (10 MB of ``[1,1,...`` is 5 million values, refused at 2 million after ~20 s and ~600 MB, about what
validating a 60,000-step workflow costs); aliases are what the value limit is for, and they are refused
without being expanded, in milliseconds.

A scalar may not hold a lone surrogate (``"\\ud800"``: half of a UTF-16 pair, which is not a character and
cannot be written as UTF-8): workflow text must be valid Unicode.

Each problem is a :class:`~runner.errors.WorkflowError` with the file, line, column and key path.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from runner.errors import WorkflowError
from runner.workflow.positions import format_path
from runner.workflow.yamlhints import quoting_hint

__all__ = ["DEFAULT_LIMITS", "Alias", "YamlLimits", "check_text", "compose", "read_text"]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_PURE_REPORT_CHARS: Final = 1_000_000  # larger documents' syntax errors are libyaml's (the pure parser is slow)
_TAGS_KEPT: Final = 4096  # distinct scalar texts whose implicit tag the composer remembers
_TAG_TEXT_KEPT: Final = 64  # ... each at most this long


@dataclass(frozen=True)
class YamlLimits:
    """The most a YAML file may hold (see the module docstring for why these numbers)."""

    max_bytes: int = 10_000_000
    max_values: int = 2_000_000
    max_depth: int = 100
    max_string: int = 1_000_000
    max_chars: int = 10_000_000


DEFAULT_LIMITS: Final = YamlLimits()


class Alias(yaml.Node):
    """An alias where it appears (``*name``): ``target`` is the anchored node, ``start_mark`` the alias's."""

    id = "alias"

    def __init__(self, target: yaml.Node, anchor: str, start_mark: Any, end_mark: Any) -> None:
        super().__init__(target.tag, target.value, start_mark, end_mark)
        self.target = target
        self.anchor = anchor


# ---------------------------------------------------------------------------------------------------
# Bytes -> text


def file_kind(mode: int) -> str:
    """``a directory``, ``a regular file``, ``a character device`` (``/dev/null``)...: what ``mode`` is."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


_INSTEAD: Final = {"inputs file": "write the inputs to a file, or give each with --input NAME=VALUE"}
"""What to do instead of giving a ``what`` that is no regular file, when there is something better to say
than saving it as one."""


def _read_at_most(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes of the file open as ``fd``, from its start: fewer only at its end."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_text(path: str | os.PathLike[str], what: str, limits: YamlLimits = DEFAULT_LIMITS) -> str:
    """The file at ``path`` as text; a located :class:`WorkflowError` when it is no regular file (a FIFO, a
    device, a directory: reading would wait for a writer or never end), cannot be read, is larger than
    ``limits.max_bytes`` (at most that many bytes are read) or is not UTF-8."""
    file = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once (and is refused below)
    except OSError as exc:
        raise WorkflowError(f"cannot read the {what}: {exc.strerror or exc}", file=file) from exc
    try:
        raw = _read_regular(fd, what, file, limits.max_bytes + 1)
    except OSError as exc:
        raise WorkflowError(f"cannot read the {what}: {exc.strerror or exc}", file=file) from exc
    finally:
        os.close(fd)
    if len(raw) > limits.max_bytes:
        raise _too_large(what, limits, file, *_position(raw, _character_start(raw, limits.max_bytes)))
    return _decoded(raw, what, file)


def _read_regular(fd: int, what: str, file: str, size: int) -> bytes:
    """Up to ``size`` bytes of ``fd``, refused when it is no regular file."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        raise WorkflowError(
            f"the {what} is {file_kind(mode)}; expected a regular file",
            file=file,
            suggestion=None
            if stat.S_ISDIR(mode)
            else _INSTEAD.get(what, f"save the {what} as a file and give its name"),
        )
    return _read_at_most(fd, size)


def _decoded(raw: bytes, what: str, file: str) -> str:
    """``raw`` as UTF-8 (a byte order mark skipped); a bad byte is reported at its line and column."""
    skip = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return str(memoryview(raw)[skip:], "utf-8")
    except UnicodeDecodeError as exc:
        start, end = skip + exc.start, skip + exc.end
        line, column = _position(raw, start)
        bad = " ".join(f"0x{byte:02x}" for byte in raw[start:end])
        raise WorkflowError(
            f"the {what} is not UTF-8 text: cannot decode {bad} (at byte offset {start})",
            file=file,
            line=line,
            column=column,
            suggestion="save the file as UTF-8",
        ) from None


def check_text(text: str, what: str, file: str | None, limits: YamlLimits = DEFAULT_LIMITS) -> None:
    """Refuse text (given as a string, not read by :func:`read_text`) too large or holding a lone surrogate."""
    if len(text) > limits.max_bytes or (
        len(text) * 4 > limits.max_bytes and len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes
    ):
        raw = text.encode("utf-8", "surrogatepass")
        raise _too_large(what, limits, file, *_position(raw, _character_start(raw, limits.max_bytes)))
    found = None if text.isascii() else _SURROGATE.search(text)
    if found is not None:
        before = text[: found.start()]
        line = before.count("\n") + 1
        raise _surrogate(found.group(), file, line, found.start() - (before.rfind("\n") + 1) + 1, None)


def _character_start(raw: bytes, offset: int) -> int:
    """The offset of the first byte of the UTF-8 character that byte ``offset`` belongs to."""
    while offset > 0 and raw[offset] & 0xC0 == 0x80:
        offset -= 1
    return offset


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of byte ``offset``."""
    start = raw.rfind(b"\n", 0, offset) + 1
    if start == 0 and raw.startswith(codecs.BOM_UTF8):
        start = min(len(codecs.BOM_UTF8), offset)
    return raw.count(b"\n", 0, offset) + 1, len(str(memoryview(raw)[start:offset], "utf-8", "replace")) + 1


def _too_large(what: str, limits: YamlLimits, file: str | None, line: int, column: int) -> WorkflowError:
    return WorkflowError(
        f"the {what} is larger than the limit of {limits.max_bytes:,} bytes",
        file=file,
        line=line,
        column=column,
    )


def _surrogate(char: str, file: str | None, line: int, column: int, path: str | None) -> WorkflowError:
    return WorkflowError(
        f"a lone surrogate ({char.encode('unicode_escape').decode()}) is not a character: "
        "workflow text must be valid Unicode",
        file=file,
        line=line,
        column=column,
        path=path,
        suggestion="a \\u escape between \\ud800 and \\udfff is half of a UTF-16 pair; "
        "write the character itself, or its \\U0001xxxx escape",
    )


# ---------------------------------------------------------------------------------------------------
# Text -> nodes


class _Counting(Composer):
    """PyYAML's composer, counting values (aliases expanded) and depth as it goes, and keeping each alias as
    an :class:`Alias` so its own position is known."""

    if TYPE_CHECKING:  # the parser's side, from the class this is mixed into

        def check_event(self, *choices: Any) -> bool: ...
        def peek_event(self) -> Any: ...
        def get_event(self) -> Any: ...
        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any: ...

        yaml_path_resolvers: dict[Any, Any]

    def start(self, file: str | None, limits: YamlLimits) -> None:
        self.file = file
        self.limits = limits
        self.total = 0  # values so far, aliases expanded
        self.chars = 0  # characters of scalars so far, aliases expanded
        # id(anchored node) -> (values, height, characters), aliases expanded
        self.sizes: dict[int, tuple[int, int, int]] = {}
        self.reached = 0  # the deepest level reached so far in the node being composed, aliases expanded
        self.loc: list[str | int | None] = []  # None: a mapping's key
        self.tags: dict[str, str] = {}  # a plain scalar's text -> its implicit tag (see scalar_tag)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        return self.node(_step(parent, index))

    def node(self, step: str | int | None) -> yaml.Node:
        """The next node, at ``step`` below the current one. PyYAML's ``compose_node`` and its
        ``compose_scalar_node`` in one (collections in :meth:`mapping` and :meth:`sequence`), with the limits
        checked before a node is composed: a scalar costs one call rather than three, and its implicit tag is
        looked up once per distinct text."""
        loc = self.loc
        loc.append(step)
        try:
            event = self.peek_event()
            kind = type(event)
            if kind is AliasEvent:
                return cast(yaml.Node, self.alias())  # None only where PyYAML raises
            depth = len(loc)
            limits = self.limits
            if depth > limits.max_depth:
                raise self.limit(
                    f"the document is nested deeper than the limit of {limits.max_depth} levels", event.start_mark
                )
            before, reached, chars = self.total, self.reached, self.chars
            self.total += 1
            if self.total > limits.max_values:
                raise self.limit(
                    f"the document holds more than the limit of {limits.max_values:,} values", event.start_mark
                )
            self.reached = depth
            anchor = event.anchor
            if anchor is not None and anchor in self.anchors:  # (reading self.anchors costs: not for every node)
                raise ComposerError(
                    f"found duplicate anchor {anchor!r}; first occurrence",
                    self.anchors[anchor].start_mark,
                    "second occurrence",
                    event.start_mark,
                )
            node: yaml.Node
            if kind is ScalarEvent:  # the most frequent node: composed here, without a call
                self.get_event()
                value = event.value
                node = ScalarNode(
                    self.scalar_tag(event.tag, value, event.implicit),
                    value,
                    event.start_mark,
                    event.end_mark,
                    style=event.style,
                )
                self.check_scalar(value, event.start_mark)
            elif kind is MappingStartEvent:
                node = self.mapping(event, anchor)
            elif kind is SequenceStartEvent:
                node = self.sequence(event, anchor)
            else:  # no other event starts a node; PyYAML's composer decides what to make of it
                node = cast(yaml.Node, super().compose_node(None, 0))
            if anchor is not None:  # only an anchored node can be repeated
                self.anchors[anchor] = node  # a collection's was set before its values, for aliases inside
                self.sizes[id(node)] = (self.total - before, self.reached - depth + 1, self.chars - chars)
            self.reached = max(reached, self.reached)
            return node
        finally:
            loc.pop()

    def mapping(self, event: Any, anchor: str | None) -> MappingNode:
        self.get_event()
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(MappingNode, None, event.implicit)
        node = MappingNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        pairs = node.value
        while type(self.peek_event()) is not MappingEndEvent:
            key = self.node(None)
            pairs.append((key, self.node(_step(node, key))))
        node.end_mark = self.get_event().end_mark
        return node

    def sequence(self, event: Any, anchor: str | None) -> SequenceNode:
        self.get_event()
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(SequenceNode, None, event.implicit)
        node = SequenceNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        items = node.value
        while type(self.peek_event()) is not SequenceEndEvent:
            items.append(self.node(len(items)))
        node.end_mark = self.get_event().end_mark
        return node

    def scalar_tag(self, tag: str | None, value: str, implicit: tuple[bool, bool]) -> str:
        """The tag of a scalar: its own, or for an untagged one what the resolver says, remembered for the
        first few thousand distinct short texts (keys and repeated values), which is where a document repeats
        itself."""
        if tag is not None and tag != "!":
            return tag
        if not implicit[0] or self.yaml_path_resolvers:
            return cast(str, self.resolve(ScalarNode, value, implicit))
        tag = self.tags.get(value)
        if tag is None:
            tag = cast(str, self.resolve(ScalarNode, value, implicit))
            if len(self.tags) < _TAGS_KEPT and len(value) <= _TAG_TEXT_KEPT:
                self.tags[value] = tag
        return tag

    def check_scalar(self, value: str, mark: Any) -> None:
        size = len(value)
        if size > self.limits.max_string:
            raise self.limit(
                f"a value of {size:,} characters is longer than the limit of {self.limits.max_string:,}",
                mark,
                suggestion="keep large data in a file the tool reads, and pass its path",
            )
        self.chars += size
        if self.chars > self.limits.max_chars:  # only aliases before it can take written-out text this far
            raise self.limit(
                f"the document holds more than the limit of {self.limits.max_chars:,} characters (aliases expanded)",
                mark,
                suggestion="an alias repeats all the text its anchor holds",
            )
        found = None if value.isascii() else _SURROGATE.search(value)
        if found is not None:
            raise _surrogate(found.group(), self.file, *_line_column(mark), self.path())

    def alias(self) -> yaml.Node | None:
        event = self.peek_event()
        target = self.anchors.get(event.anchor)
        if target is None:
            return super().compose_node(None, 0)  # PyYAML's error for an undefined alias
        self.get_event()
        # An alias inside the node it names has no size yet: the loader refuses it.
        values, height, chars = self.sizes.get(id(target), (1, 1, 0))
        name = f"the alias *{event.anchor}"
        if self.total + values > self.limits.max_values:
            raise self.limit(
                f"{name} repeats {values:,} values, taking the document past the limit of "
                f"{self.limits.max_values:,} values (aliases expanded)",
                event.start_mark,
                suggestion="an alias repeats everything its anchor holds, and aliases inside it repeat theirs",
            )
        deepest = len(self.loc) - 1 + height
        if deepest > self.limits.max_depth:
            raise self.limit(
                f"{name} nests the document deeper than the limit of {self.limits.max_depth} levels", event.start_mark
            )
        if self.chars + chars > self.limits.max_chars:
            raise self.limit(
                f"{name} repeats {chars:,} characters, taking the document past the limit of "
                f"{self.limits.max_chars:,} characters (aliases expanded)",
                event.start_mark,
                suggestion="an alias repeats all the text its anchor holds: keep large data in a file the tool "
                "reads, and pass its path",
            )
        self.total += values
        self.chars += chars
        self.reached = max(self.reached, deepest)
        return Alias(target, event.anchor, event.start_mark, event.end_mark)

    def path(self) -> str | None:
        loc = tuple(step for step in self.loc[1:] if step is not None)
        if len(loc) > 8:
            return f"{format_path(loc[:6])}... ({len(loc)} levels)"
        return format_path(loc) or None

    def limit(self, message: str, mark: Any, suggestion: str | None = None) -> WorkflowError:
        return WorkflowError(
            message,
            file=self.file,
            line=mark.line + 1,
            column=mark.column + 1,
            path=self.path(),
            suggestion=suggestion,
        )


def _step(parent: yaml.Node | None, index: Any) -> str | int | None:
    """The key path step to a node: its index in a list, its key in a mapping, None for a key itself."""
    if isinstance(index, int):
        return index
    if isinstance(index, yaml.ScalarNode):
        return str(index.value)
    return None


def _line_column(mark: Any) -> tuple[int, int]:
    return mark.line + 1, mark.column + 1


class _PureLoader(_Counting, yaml.SafeLoader):
    """The pure-Python parser."""


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _FastLoader(_Counting, CParser, SafeConstructor, Resolver):
        """libyaml's parser (its events), composed by :class:`_Counting` rather than by libyaml."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    _FAST: type[_Counting] = _FastLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _FAST = _PureLoader


def compose(text: str, file: str | None, limits: YamlLimits = DEFAULT_LIMITS, *, fast: bool = True) -> yaml.Node | None:
    """One YAML document's nodes; ``fast=False`` forces the pure-Python parser. Syntax errors are reported
    by the pure-Python parser, so messages do not depend on libyaml being present (except in a document of
    more than a million characters, where parsing it again in Python would take seconds)."""
    check_text(text, "document", file, limits)
    try:
        return _compose_either(text, file, limits, fast=fast)
    except (yaml.YAMLError, RecursionError, _OutOfMemory) as exc:
        raise _compose_error(exc, text, file) from None


def _compose_either(text: str, file: str | None, limits: YamlLimits, *, fast: bool) -> yaml.Node | None:
    """Composed by libyaml's parser when ``fast``; a syntax error it finds is composed again by the pure-Python
    parser, for that parser's message."""
    try:
        return _compose(_FAST if fast else _PureLoader, text, file, limits)
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.MarkedYAMLError) and exc.problem == "exceeded maximum nesting depth":
            # libyaml looks ahead in a flow collection ([[[[...) and gives up at 1,000 levels, before
            # handing on the events that cross our limit: compose what comes before that point.
            return _compose(_FAST, text[: exc.problem_mark.index if exc.problem_mark else 0], file, limits)
        if not fast or _FAST is _PureLoader:
            raise
        if len(text) > _PURE_REPORT_CHARS and not isinstance(exc, yaml.reader.ReaderError):
            raise  # the pure-Python reader finds a bad character at once; its parser would take seconds
        return _compose(_PureLoader, text, file, limits)


def _compose_error(exc: BaseException, text: str, file: str | None) -> WorkflowError:
    """What composing ``text`` raised, as the located :class:`WorkflowError` to report."""
    if isinstance(exc, yaml.MarkedYAMLError):
        return _syntax_error(exc, text, file)
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[: exc.position]
        return WorkflowError(
            f"invalid YAML: the character U+{exc.character:04X} is not allowed in YAML text",
            file=file,
            line=before.count("\n") + 1,
            column=exc.position - before.rfind("\n"),
            suggestion='write control characters as escapes in a double-quoted string ("\\t", "\\x1b")',
        )
    if isinstance(exc, yaml.YAMLError):
        return WorkflowError(f"invalid YAML: {exc}", file=file)
    if isinstance(exc, RecursionError):
        return WorkflowError("the document is nested too deeply", file=file)
    return WorkflowError(
        f"the document is too large to load in the memory available ({len(text):,} characters)",
        file=file,
        suggestion="keep large data in files the tools read, and pass their paths",
    )


class _OutOfMemory(Exception):
    """Composing ran out of memory; raised once the partial tree is freed, so reporting it has memory to work."""


def _compose(loader_class: type[_Counting], text: str, file: str | None, limits: YamlLimits) -> yaml.Node | None:
    loader: Any = loader_class(text)  # type: ignore[call-arg]
    loader.start(file, limits)
    try:
        node: yaml.Node | None = loader.get_single_node()
        return node
    except MemoryError:
        pass  # leaving this block drops the traceback, whose frames hold the partial tree
    finally:
        loader.dispose()
    del loader
    raise _OutOfMemory


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, file: str | None) -> WorkflowError:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "invalid YAML"
    hint = "indent with spaces: YAML does not allow tabs" if "'\\t'" in problem else None
    if hint is None and mark is not None:
        hint = quoting_hint(problem, _line_at(text, mark.index))
    return WorkflowError(
        _syntax_message(exc, problem, mark),
        file=file,
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        suggestion=hint,
    )


_LINE_BREAKS: Final = re.compile("[\r\n\x85\u2028\u2029]")  # what PyYAML's reader counts as line breaks


def _line_at(text: str, index: int) -> str:
    """The line of ``text`` holding ``index``, without its line break."""
    start = max((m.end() for m in _LINE_BREAKS.finditer(text, 0, index)), default=0)
    end = _LINE_BREAKS.search(text, index)
    return text[start : end.start() if end else len(text)]


def _syntax_message(exc: yaml.MarkedYAMLError, problem: str, mark: Any) -> str:
    """PyYAML's problem, with its context: where the construct it is in started, when that is another line."""
    if exc.context and problem.startswith("but "):
        return f"invalid YAML: {exc.context}, {problem}"
    message = f"invalid YAML: {problem}"
    if not (exc.context and exc.problem):
        return message
    started = exc.context_mark
    if started is not None and mark is not None and started.line != mark.line:
        return message + f" ({exc.context} started at line {started.line + 1})"
    return message + f" ({exc.context})"
