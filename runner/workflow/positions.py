"""Where a workflow's keys and values sit in its file, and the errors located there.

:class:`Positions` is recorded by :mod:`runner.workflow.loader` (1-based line and column by key path) and read by
everything that reports a problem in a workflow: the schema errors, the plan, the inputs of a run. A problem is a
:class:`~runner.errors.WorkflowError`; several found in one pass are one :class:`WorkflowErrors`
(:func:`raise_errors`). :func:`describe` and :func:`format_path` word what was found, and where.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.errors import WorkflowError
from runner.quoting import quote

__all__ = [
    "Loc",
    "Positions",
    "WorkflowErrors",
    "describe",
    "format_path",
    "raise_errors",
    "suggest_identifier",
]

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Positions:
    """Where keys and values sit in the source file, by key path (1-based line and column).

    ``keys[loc]`` is the start of the mapping key that leads to ``loc``, ``values[loc]`` the start of
    its value (list items have only a value). A path with no entry (inside a YAML alias, say) is located
    at its nearest recorded ancestor.
    """

    file: str | None = None
    keys: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    values: dict[Loc, tuple[int, int]] = field(default_factory=dict)

    def locate(self, loc: Loc, *, at: Literal["key", "value"] = "value") -> tuple[int | None, int | None]:
        """The ``(line, column)`` of ``loc``, falling back to its nearest ancestor; ``(None, None)`` if none."""
        table = self.keys if at == "key" else self.values
        if loc in table:
            return table[loc]
        for end in range(len(loc), -1, -1):
            prefix = loc[:end]
            if prefix in self.values:
                return self.values[prefix]
            if prefix in self.keys:
                return self.keys[prefix]
        return None, None

    def error(
        self,
        message: str,
        loc: Loc,
        *,
        suggestion: str | None = None,
        at: Literal["key", "value"] = "value",
    ) -> WorkflowError:
        """A :class:`WorkflowError` located at ``loc``."""
        line, column = self.locate(loc, at=at)
        return WorkflowError(
            message, file=self.file, line=line, column=column, path=format_path(loc) or None, suggestion=suggestion
        )


class WorkflowErrors(WorkflowError):
    """Several problems found in one pass; ``errors`` lists each (sorted by position), ``str()`` shows all.

    The location attributes (``file``, ``line``, ...) are those of the first error.
    """

    def __init__(self, errors: Sequence[WorkflowError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(
            f"{len(self.errors)} problems",
            file=first.file,
            line=first.line,
            column=first.column,
            path=first.path,
            suggestion=first.suggestion,
        )

    def __str__(self) -> str:
        return "\n".join(str(error) for error in self.errors)


def raise_errors(errors: Iterable[WorkflowError]) -> None:
    """Raise nothing for no errors, the error itself for one, :class:`WorkflowErrors` for several."""
    unique: dict[str, WorkflowError] = {}
    for error in errors:
        unique.setdefault(str(error), error)
    found = sorted(unique.values(), key=lambda e: (e.line or 0, e.column or 0))
    if len(found) == 1:
        raise found[0]
    if found:
        raise WorkflowErrors(found)


def format_path(loc: Loc) -> str:
    """``("steps", "a", "needs", 1)`` -> ``steps.a.needs[1]``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def suggest_identifier(name: str) -> str:
    """The identifier closest to ``name``: ``convert-files`` -> ``convert_files``, ``1st`` -> ``_1st``."""
    fixed = re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
    return fixed if not fixed[0].isdigit() else "_" + fixed


def describe(value: Any) -> str:
    """A short description of a found value: ``a string ('x')``, ``an integer (5)``, ``a list``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({quote(value)})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"
