"""The layers of the package and the arrows allowed between them (docs/design.md).

Walks every module's imports (module level and inside functions) with ``ast`` and checks them against the
table below, so a convenient shortcut cannot quietly turn the design into a tangle.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

import runner

PACKAGE = Path(runner.__file__).parent

# The pure core: the sans-IO protocol, the workflow language, the journal's fold and the shared vocabulary
# (errors, exit codes, the backoff formula). No I/O library; pydantic and jmespath only.
CORE = {
    "runner._trio",
    "runner.errors",
    "runner.exitcodes",
    "runner.backoff",
    "runner.words",
    "runner.termsafe",
    "runner.jsontext",
    "runner.quoting",
    "runner.protocol",
    "runner.workflow",
    "runner.masking",  # secrets, and the journal's text encoding, which the journal reader decodes
    "runner.schemas",
    "runner.engine.core",  # events, their fold, outcomes and the executors' shared decisions
    "runner.engine.journal.reader",  # reads journal files back; no I/O library
}
CORE_EXCEPT = {"runner.workflow.loader", "runner.workflow.yamlnodes"}  # read YAML files: a layer of their own
STDLIB_ONLY_THIRD_PARTY = {"pydantic", "jmespath"}

# module prefix -> runner modules it may import (beyond the pure core); the longest prefix applies
ALLOWED: dict[str, set[str]] = {
    "runner.transports": {"runner.transports"},
    "runner.session": {"runner.session", "runner.transports.base"},
    "runner.connect": {"runner.session", "runner.transports", "runner.auth", "runner.launch"},
    "runner.auth": {"runner.auth"},
    "runner.workflow.loader": set(),
    "runner.workflow.yamlnodes": set(),
    "runner.launch": set(),
    # What a run masks: a plan's secrets, stdio servers' passed-through variables, OAuth's references.
    "runner.secrets_of": {"runner.launch", "runner.auth"},
    "runner.pipes": set(),  # the standard streams of the command (os.dup2): I/O, so not the core
    # The journal's writer and run directories: the core, and each other.
    "runner.engine.journal": {"runner.engine.journal"},
    # One item's call: its journal and its server's link (servers.py, which finds a stdio server's folder with
    # runner.launch) and session, never the scheduler or the lifecycle.
    "runner.engine.calls": {
        "runner.engine.calls",
        "runner.engine.journal",
        "runner.launch",
        "runner.session",
        "runner.transports.base",
    },
    "runner.engine": {
        "runner.engine",
        "runner.session",
        "runner.transports.base",
        "runner.connect",
        "runner.launch",
        "runner.auth",
        "runner.secrets_of",
    },
    # OpenTelemetry (the otel extra): the run's events, the current item of a call, the session's tracer hook.
    "runner.engine.telemetry": {"runner.engine.telemetry", "runner.engine.calls.current", "runner.session.options"},
    "runner.view": {"runner.view"},
    # A run's report (HTML, JUnit, Markdown): built from the fold and rendered as text; no I/O.
    "runner.report": {"runner.report", "runner.view"},
    "runner.testing": {"runner.testing", "runner.transports", "runner.connect", "runner.session", "runner.auth"},
    "runner.demo": {"runner.demo"},
    # The Python API and the engine selector: the local engine, and the Temporal one imported inside
    # engine_named only (see test_only_the_cli_imports_temporal).
    "runner.api": {"runner.engine", "runner.engines", "runner.temporal"},
    # The Engine interface, which the Temporal engine implements: never the Temporal engine itself.
    "runner.engines": {"runner.engine"},
    # The Temporal engine: the pure core and the local engine's pieces (state, outcome, sessions), never the
    # reverse (see test_only_the_cli_imports_temporal).
    "runner.temporal": {
        "runner.temporal",
        "runner.engine",
        "runner.engines",
        "runner.session",
        "runner.workflow.loader",
        "runner.secrets_of",
    },
}

IO_LIBRARIES = {"trio", "httpx", "httpx2", "httpx_sse", "yaml", "anyio", "tenacity", "rich", "mcp"}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


MODULES = sorted((module_name(p), p) for p in PACKAGE.rglob("*.py"))


def _within(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize(("name", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_imports_follow_the_layers(name: str, path: Path) -> None:
    runner_imports = {i for i in imports_of(path) if i.startswith("runner.")}
    # drop "from runner.x import y" duplicates that name attributes, keep module paths that exist
    runner_imports = {i for i in runner_imports if _is_module(i)}
    if name.startswith("runner.cli") or name == "runner.__main__":
        return  # the CLI (and `python -m runner`) may import everything
    assert not any(i.startswith("runner.cli") for i in runner_imports), f"{name} imports the CLI"
    if name == "runner":  # the package: the version, and its public names imported lazily from where they live
        assert runner_imports <= set(runner._FROM), f"runner imports {runner_imports - set(runner._FROM)}"
        return
    if _within(name, CORE) and name not in CORE_EXCEPT:
        third_party = {i.split(".")[0] for i in imports_of(path)} & IO_LIBRARIES
        assert not third_party, f"pure core module {name} imports {third_party}"
        outside = {i for i in runner_imports if not _within(i, CORE) or i in CORE_EXCEPT}
        assert not outside, f"{name} imports {outside}"
        return
    prefix = max((p for p in ALLOWED if name == p or name.startswith(p + ".")), key=len, default=None)
    assert prefix is not None, f"{name} has no row in the layer table"
    allowed = ALLOWED[prefix] | CORE
    outside = {i for i in runner_imports if not _within(i, allowed) and i not in (name, "runner")}
    assert not outside, f"{name} may not import {sorted(outside)}"


def _is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


@pytest.mark.parametrize("module", ["scheduler.py", "calls/servers.py"])
def test_the_scheduler_never_constructs_a_transport(module: str) -> None:
    found = imports_of(PACKAGE / "engine" / module)
    concrete = ("runner.transports.stdio", "runner.transports.http", "runner.connect")
    assert not any(i.startswith(concrete) for i in found)


def test_version_does_not_import_heavy_libraries() -> None:
    import subprocess
    import sys

    code = (
        "import contextlib, io, sys\n"
        "from runner.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--version'])\n"
        "heavy = ('trio', 'httpx', 'httpx2', 'pydantic', 'yaml', 'rich', 'opentelemetry')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def _modules_after(argv: list[str]) -> set[str]:
    """The modules loaded once ``mcp-run ARGV`` has finished, in a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "import contextlib, io, sys\n"
        "from runner.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    assert main({argv!r}) == 0\n"
        "print(' '.join(sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


def test_version_builds_no_command() -> None:
    """``--version`` is answered before any command's parser is built (each pulls in its module, and
    ``dataclasses`` with ``inspect``: twice the instructions of the interpreter's own start)."""
    loaded = _modules_after(["--version"])
    assert not {m for m in loaded if m.startswith("runner.cli.")}, sorted(loaded)
    assert "dataclasses" not in loaded


def test_validate_opens_no_session() -> None:
    """``validate`` and ``plan`` contact no server: they load no session, transport or scheduler, hence no trio
    (about 40% of a run's start-up). ``runner.engine.runctl`` imports those where a session is opened."""
    workflow = str(PACKAGE.parent / "workflows" / "convert_docs.yaml")
    for command in ("validate", "plan"):
        loaded = _modules_after([command, workflow])
        assert "runner.launch" in loaded  # the test exercises the stdio servers' launch checks
        heavy = {"trio", "runner.session", "runner.connect", "runner.engine.scheduler", "runner.transports"}
        assert not heavy & loaded, f"{command} loads {sorted(heavy & loaded)}"


def test_only_the_cli_imports_temporal() -> None:
    """The base install needs no temporalio: only runner.temporal imports it, and only the CLI imports that, and
    the engine selector (runner.api.engine_named), inside the function, when asked for engine="temporal" only: so that
    ``runner.run_workflow(..., engine="temporal")`` works, while ``import runner`` and the local engine never
    load it (the selector says what to install when temporalio is missing)."""
    for name, path in MODULES:
        found = imports_of(path)
        if not name.startswith(("runner.temporal", "runner.cli.temporal")):
            assert not any(i.split(".")[0] == "temporalio" for i in found), f"{name} imports temporalio"
        if name == "runner.api":
            found = module_level_imports(path)
        if not name.startswith(("runner.temporal", "runner.cli")):
            assert not any(i.startswith("runner.temporal") for i in found), f"{name} imports runner.temporal"


def test_only_the_telemetry_module_imports_opentelemetry() -> None:
    """The otel extra is optional: only runner.engine.telemetry.otel imports opentelemetry, and only
    runner.engine.telemetry imports that, inside a function, once the OTEL_* variables asked for traces (a run
    with none loads nothing of it: tests/test_telemetry.py::test_an_untraced_run_imports_no_opentelemetry)."""
    for name, path in MODULES:
        found = imports_of(path)
        if name != "runner.engine.telemetry.otel":
            assert not any(i.split(".")[0] == "opentelemetry" for i in found), f"{name} imports opentelemetry"
        if name != "runner.engine.telemetry.otel":
            at_import = _run_time_module_imports(path)
            assert "runner.engine.telemetry.otel" not in at_import, f"{name} imports runner.engine.telemetry.otel"


def _run_time_module_imports(path: Path) -> set[str]:
    """:func:`module_level_imports` without those under ``if TYPE_CHECKING:`` (which never run)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = [ast.Pass()]
    return _module_level(tree)


def module_level_imports(path: Path) -> set[str]:
    """The imports of a module outside its functions (those run when it is imported)."""
    return _module_level(ast.parse(path.read_text()))


def _module_level(tree: ast.Module) -> set[str]:
    inside = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _folder_of(module: str) -> str:
    """The node a module belongs to: its package (the folder it sits in, ``runner.engine.core`` for
    ``runner.engine.core.events``), a package for itself, and a top-level module (``runner.connect``) for itself."""
    if (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").exists():
        return module
    parent = module.rpartition(".")[0]
    return module if parent == "runner" else parent


def _modules_imported(path: Path) -> set[str]:
    """The runner modules ``path`` imports (``from runner.x import y`` names the module ``runner.x``, or
    ``runner.x.y`` when y is a module), each import counted once. The package ``runner`` itself is left out: its
    public names, imported lazily from where they live, are no layer (the CLI reads ``runner.__version__``)."""
    found = set()
    for name in imports_of(path):
        parts = name.split(".")
        while parts and not _is_module(".".join(parts)):
            parts.pop()
        if len(parts) > 1 and parts[0] == "runner":
            found.add(".".join(parts))
    return {m for m in found if not any(other.startswith(m + ".") for other in found)}


def _folder_graph() -> dict[str, dict[str, list[str]]]:
    """folder -> the folders it imports -> the imports that make the arrow (module-level and inside functions)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in MODULES:
        source = _folder_of(name)
        for module in sorted(_modules_imported(path)):
            target = _folder_of(module)
            if target != source:
                graph.setdefault(source, {}).setdefault(target, []).append(f"{name} -> {module}")
    return graph


def _a_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle of ``graph`` (its nodes in order, the first repeated at the end), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = [start]
        todo = [iter(sorted(graph.get(start, {})))]
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                done.add(path.pop())
                todo.pop()
            elif nxt in path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done:
                path.append(nxt)
                todo.append(iter(sorted(graph.get(nxt, {}))))
    return None


def test_no_import_circle_between_folders() -> None:
    """A folder (package) of runner/ never imports, through any chain, a folder that imports it: each folder
    can be read, and changed, knowing only those below it."""
    graph = _folder_graph()
    cycle = _a_cycle(graph)
    if cycle is not None:
        arrows = [f"{a} -> {b}: {', '.join(graph[a][b])}" for a, b in itertools.pairwise(cycle)]
        pytest.fail("import circle between folders:\n" + "\n".join(arrows))


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b": ["a.x -> b.y"]}, "b": {"c": ["b.y -> c.z"]}, "c": {"a": ["c.z -> a.x"]}, "d": {"a": []}}
    assert _a_cycle(graph) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b": []}, "b": {}}) is None
