"""Hints for the YAML syntax errors a workflow's author makes most: a value that needs quotes.

Pure text work (no YAML library): given the problem PyYAML reported and the line it points at, say what to
write instead, showing the fixed line.

* ``text: ${{ format('a: {}', item) }}`` or ``name: value: x``: a ``": "`` inside an unquoted value starts a
  mapping, and PyYAML says "mapping values are not allowed here". The fix quotes the value.
* ``args: {text: ${{ inputs.x }}}``: in a flow mapping (``{...}``) or list (``[...]``) a ``{`` ends a plain
  value, so an unquoted template there is "expected ',' or '}', but got '{'". The fix quotes each template.

Entry point::

    quoting_hint(problem, line) -> str | None     the hint, or None when the line is not one of these cases
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["quote_value", "quoting_hint"]

# indentation and an optional "- ", a plain or quoted key, ": ", the value (a trailing comment is kept apart)
_KEY_VALUE: Final = re.compile(
    r"""^(?P<lead>\s*(?:-\s+)?)(?P<key>"[^"]*"|'[^']*'|[^\s'"#{\[][^:#]*?):[ \t]+"""
    r"""(?P<value>.*?)(?P<comment>[ \t]+\#.*)?$"""
)
# an unquoted template in a flow collection: after "{", "[", "," or ": ", up to the first "}}"
_FLOW_TEMPLATE: Final = re.compile(r"(?P<before>(?:^|[{\[,]|:)[ \t]*)(?P<template>\$\{\{.*?\}\})")


def quote_value(value: str) -> str:
    """``value`` as a YAML quoted scalar holding exactly that text: single quotes (nothing is escaped in them
    but the quote itself, so a template's backslashes stay as written) unless the value holds a ``'`` and
    double quotes need no escapes."""
    if "'" in value and not any(c in value for c in '"\\'):
        return f'"{value}"'
    return "'" + value.replace("'", "''") + "'"


def quoting_hint(problem: str, line: str) -> str | None:
    """The hint for ``problem`` (PyYAML's words) found on ``line`` (the source line, without its newline)."""
    if problem == "mapping values are not allowed here":
        return _mapping_value_hint(line)
    if problem.startswith("expected ',' or ") and "${{" in line:
        return _flow_template_hint(line)
    return None


def _mapping_value_hint(line: str) -> str | None:
    match = _KEY_VALUE.match(line)
    if match is None or not match["value"] or match["value"][0] in "'\"{[|>&*!":
        return None
    fixed = match["lead"] + match["key"] + ": " + quote_value(match["value"]) + (match["comment"] or "")
    return f'quote the value (a ": " inside an unquoted value starts a mapping): {fixed.strip()}'


def _flow_template_hint(line: str) -> str | None:
    fixed = _FLOW_TEMPLATE.sub(lambda m: m["before"] + quote_value(m["template"]), line)
    if fixed == line:
        return None
    return f"quote each template inside {{...}} or [...] (a '{{' there ends an unquoted value): {fixed.strip()}"
