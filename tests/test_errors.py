"""How errors read: a server's stderr tail on lines of its own, safe to print."""

from __future__ import annotations

from runner.errors import STDERR_LINE_CHARS, STDERR_TAIL_LINES, ConnectFailed, McpRunError, OutcomeUnknown, printable


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


INTERNAL_ERRORS = {
    "Drained": "an interrupt before dispatch: the item did not run, caught by the scheduler",
    "TaskUncollected": "a task's result not collected now: caught by the item, a resume collects it",
    "CannotCheck": "arguments that cannot be checked: the call goes out unchecked, with a warning",
    "InvalidSchema": "a kind of CannotCheck",
    "PatternTimeout": "a kind of CannotCheck",
    "PlanCheckFailed": "the CLI's `plan --check` only",
    "CallRefused": "the CLI's `call` only (a UsageError: exit 2, nothing sent)",
}


def _every_error_class() -> set[type[McpRunError]]:
    """Every McpRunError subclass defined anywhere in runner/ (each module imported: the Temporal ones only with
    the extra installed, which the Temporal errors do not need: they are defined in runner.errors)."""
    import importlib
    import pkgutil

    import runner

    for module in pkgutil.walk_packages(runner.__path__, "runner."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError as exc:
            assert exc.name is not None and exc.name.startswith("temporalio"), exc
    found: set[type[McpRunError]] = set()
    todo: list[type[McpRunError]] = [McpRunError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("runner.") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_error_is_public_from_runner_and_drawn_in_the_tree() -> None:
    """A caller catches ``runner.X`` for every error it may meet, and finds it in runner.errors' tree."""
    import re

    import runner
    from runner import errors

    drawn = set(re.findall(r"[├└]── (\w+)", errors.__doc__ or ""))
    for cls in _every_error_class():
        name = cls.__name__
        if name in INTERNAL_ERRORS:
            assert name not in runner.__all__ and name not in drawn, name
            continue
        assert name in runner.__all__, f"{cls.__module__}.{name} is not exported from runner"
        assert getattr(runner, name) is cls, name
        assert name in drawn, f"{name} is not drawn in runner.errors' tree"
        parent = cls.__bases__[0].__name__
        line = next(line for line in (errors.__doc__ or "").splitlines() if re.search(rf"── {name}\b", line))
        assert _parent_of(errors.__doc__ or "", line) == parent, f"{name} is drawn under the wrong parent"
    assert drawn <= set(runner.__all__) | {"McpRunError"}, drawn - set(runner.__all__)


def _parent_of(tree: str, line: str) -> str:
    """The name drawn one level above ``line`` in the tree (the nearest line before it, indented 4 less)."""
    lines = tree.splitlines()
    depth = line.index("──")
    for above in reversed(lines[: lines.index(line)]):
        if "──" in above and above.index("──") == depth - 4:
            return above.split("── ", 1)[1].split()[0]
        if "──" not in above and above.strip().startswith("McpRunError"):
            return "McpRunError"
    raise AssertionError(line)
