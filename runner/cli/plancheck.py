"""``mcp-run plan --check``: connect to every server, list its tools, and check the plan against them.

Each step is checked as far as it can be before the run (see :func:`check_plan`); what depends on run-time
data is listed as a note. Findings are one per line: ``error: FILE:LINE:COLUMN: step ID: args.PATH: what``
(an error makes the check fail, exit 2) or ``note: step ID: ...``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from runner._trio import single_error
from runner.engine.calls.servers import has_unsafe_calls
from runner.engine.calls.tools import unknown_tool
from runner.engine.journal.writer import Masker
from runner.engine.runctl import env_context, make_opener
from runner.errors import McpRunError, TransportError
from runner.exitcodes import ExitCode, combine
from runner.protocol.mcp import Tool
from runner.quoting import cut, masking
from runner.secrets_of import collect_secrets
from runner.session import SessionOptions
from runner.words import plural
from runner.workflow.argcheck import ArgsValidator, CannotCheck, compile_schema, unlisted_arguments
from runner.workflow.context import make_context
from runner.workflow.expressions import Loc, Reference
from runner.workflow.partial import Partial, render_known, what_it_reads
from runner.workflow.plan import Plan, PlannedStep
from runner.workflow.positions import format_path
from runner.workflow.template import TemplateError, canonical_json

if TYPE_CHECKING:
    from runner.engine.scheduler import SessionOpener

__all__ = ["PlanCheckFailed", "check_plan"]

MAX_ITEM_PROBLEMS: Final = 5  # problems shown for the items of one fan-out step; the rest are counted


class PlanCheckFailed(McpRunError):
    """The plan could not be checked against every server: one could not be reached (exit 4, as everywhere
    else) or broke the protocol (exit 3). ``lines`` holds every finding, unreachable servers first; the error
    reads ``cannot check the plan: server NAME: REASON`` followed by the other findings, one per line."""

    def __init__(self, lines: list[str], exit_code: ExitCode) -> None:
        self.lines = lines
        self.exit_code = exit_code
        first, *rest = lines
        super().__init__("\n".join(["cannot check the plan: " + first.removeprefix("error: "), *rest]))


def check_plan(plan: Plan, *, connect_timeout: float | None = None) -> list[str]:
    """Problems and notes, one finding each (a server's stderr tail on lines of its own); findings that start
    with ``error`` make the check fail (exit 2). Secret values are masked.

    Checked, for every step: its tool exists (else the closest names are suggested); its arguments validate
    against the tool's ``inputSchema`` as far as they are known before the run. Templates over ``inputs`` (with
    a value) and ``env`` are rendered; an argument that reads the item or another step's results is left out
    and listed in a note ("checked at run time"), while the others, the required arguments and unexpected ones
    are still checked. A fan-out whose ``for_each`` reads only inputs and env is rendered, and each item's
    arguments are checked in full. Tools annotated destructive are flagged (annotations are hints, shown
    whether or not the server is trusted).

    ``connect_timeout`` (``--connect-timeout``) bounds reaching a server that sets no ``connect_timeout`` (None:
    the default, :meth:`~runner.workflow.servers.PlannedServer.connect_within`).

    Raises :class:`PlanCheckFailed` when a server could not be reached or broke the protocol, unless the
    plan has errors of its own as well (those win: exit 2, as :func:`runner.exitcodes.combine` orders them).
    """
    inputs = dict(plan.input_values or {})
    env = env_context(plan)
    masker = Masker(collect_secrets(plan, inputs, env))
    opener = make_opener(plan, inputs, env, redact=masker.mask)
    tools, failures, eras = _list_tools(plan, opener, connect_timeout)
    lines = [f"error: server {name}: {masker.scrub(failures[name])}" for name in plan.servers if name in failures]
    lines += [f"note: server {name}: {eras[name]}" for name in plan.servers if name in eras]
    findings = _step_findings(_StepChecker(plan, inputs, env), tools, masker)
    lines += [masker.mask(line) for line in findings]
    if failures:
        code = _failed_code(failures, findings)
        if code != ExitCode.USAGE:
            raise PlanCheckFailed(lines, code)
    if not any(line.startswith("error") for line in lines):
        steps, servers = len(plan.steps), len(tools)
        lines.append(f"ok: {plural(steps, 'step')} checked against {plural(servers, 'server')}")
    return lines


def _list_tools(
    plan: Plan, opener: SessionOpener, connect_timeout: float | None
) -> tuple[dict[str, dict[str, Tool]], dict[str, McpRunError], dict[str, str]]:
    """The tools of every server a step uses, by server and name, listed at once; why each server that
    could not list them failed; and, for a server whose era ``auto`` chose for durability (some call on it is
    not safe to repeat), which era and why (as a run would choose it: :func:`has_unsafe_calls`)."""
    tools: dict[str, dict[str, Tool]] = {}
    failures: dict[str, McpRunError] = {}
    eras: dict[str, str] = {}

    async def one(name: str) -> None:
        try:
            with single_error():
                server = plan.servers[name]
                timeout = server.connect_within(connect_timeout)
                options = SessionOptions(
                    name=name,
                    server_log_level=None,
                    initialize_timeout=timeout,
                    protocol=server.protocol,
                    tasks_extension=server.server.tasks != "off",
                    durable=has_unsafe_calls(plan, name),
                )
                async with opener(name, options) as session:
                    if session.era_why is not None:
                        eras[name] = f"protocol {session.protocol_version}, chosen because {session.era_why}"
                    tools[name] = {t.name: t for t in await session.list_tools()}
        except McpRunError as exc:
            failures[name] = exc

    async def list_all() -> None:
        async with trio.open_nursery() as nursery:
            for name in plan.servers:
                if any(s.server == name for s in plan.steps.values()):
                    nursery.start_soon(one, name)

    trio.run(list_all)
    return tools, failures, eras


def _step_findings(checker: _StepChecker, tools: dict[str, dict[str, Tool]], masker: Masker) -> list[str]:
    """Every step's findings, in the plan's order; a step whose server listed no tools has none."""
    plan = checker.plan
    findings: list[str] = []
    with masking(masker.mask):  # a value quoted into a finding is masked before it is cut
        for sid in plan.order:
            step = plan.steps[sid]
            found = tools.get(step.server)
            if found is not None:
                findings += checker.check(step, found)
    return findings


def _failed_code(failures: dict[str, McpRunError], findings: list[str]) -> ExitCode:
    """The exit code of a check some servers failed: theirs, combined with the plan's own errors (usage)."""
    # Listing tools has no side effects: a connection lost on the way means unreachable, not in doubt.
    codes = [ExitCode.UNREACHABLE if isinstance(e, TransportError) else e.exit_code for e in failures.values()]
    if any(line.startswith("error") for line in findings):
        codes.append(ExitCode.USAGE)
    return combine(codes)


class _StepChecker:
    """Checks one step at a time against its server's tools (see :func:`check_plan`)."""

    def __init__(self, plan: Plan, inputs: dict[str, Any], env: dict[str, str | None]) -> None:
        self._plan = plan
        self._inputs = inputs
        self._env = env
        given = plan.input_values or {}
        # An input with no value here (not given, no default) is known only when the run is started.
        self._unset = {
            name for name, spec in plan.workflow.inputs.items() if given.get(name) is None and not spec.has_default
        }

    @property
    def plan(self) -> Plan:
        return self._plan

    def check(self, step: PlannedStep, tools: dict[str, Tool]) -> list[str]:
        sid = step.id
        tool = tools.get(step.tool)
        if tool is None:
            return [self._error(("steps", sid, "tool"), sid, unknown_tool(step.server, step.tool, tools))]
        errors: list[str] = []
        notes: list[str] = []
        a = tool.annotations
        if not a.given:
            notes.append(f"note: step {sid}: {step.tool} has no annotations (nothing says it is safe)")
        elif a.destructive and not a.read_only:
            by = "" if "destructiveHint" in a.given else " (by default: it is not marked read-only)"
            notes.append(f"note: step {sid}: {step.tool} is annotated destructive{by}")
        try:
            validator = compile_schema(tool.input_schema)
            self._arguments(step, validator, errors, notes)
        except CannotCheck as exc:
            notes.append(f"note: step {sid}: arguments not checked: tool {step.tool}: {exc}")
        notes += _unlisted(step, tool)
        return errors + notes

    def _arguments(self, step: PlannedStep, validator: ArgsValidator, errors: list[str], notes: list[str]) -> None:
        sid = step.id
        items = self._items(step, errors) if step.fan_out else None
        # The arguments with the item unknown: what is wrong here is wrong for every item.
        shared = self._render(step)
        reported = self._report(step, shared, validator, errors)
        if items:
            self._each_item(step, items, validator, reported, errors)
        for unknown in shared.unknowns:
            if items is not None and all(ref.root in ("item", "index") for ref in unknown.reads):
                continue  # checked with each item
            if unknown.loc[3:] in reported.values():
                continue  # wrong whatever it turns out to be: reported above
            notes.append(
                f"note: step {sid}: {format_path(unknown.loc[2:])} depends on {what_it_reads(unknown)}; "
                "checked at run time"
            )

    def _report(
        self, step: PlannedStep, partial: Partial, validator: ArgsValidator, errors: list[str]
    ) -> dict[str, Loc]:
        """Add ``partial``'s problems to ``errors``; each problem's text and path."""
        found = _problems(partial, validator)
        for path, text, key in found:
            errors.append(self._error(("steps", step.id, "args", *path), step.id, text, key=key))
        return {text: path for path, text, _ in found}

    def _each_item(
        self, step: PlannedStep, items: list[Any], validator: ArgsValidator, reported: dict[str, Loc], errors: list[str]
    ) -> None:
        """Each item's arguments, in full; problems already reported for all items are not repeated."""
        found: list[str] = []
        for index, item in enumerate(items):
            for path, text, key in _problems(self._render(step, item, index), validator):
                if text not in reported:
                    loc = ("steps", step.id, "args", *path)
                    found.append(self._error(loc, step.id, f"item {index} ({_short(item)}): {text}", key=key))
        errors += found[:MAX_ITEM_PROBLEMS]
        if len(found) > MAX_ITEM_PROBLEMS:
            more = plural(len(found) - MAX_ITEM_PROBLEMS, "more problem")
            errors.append(self._error(("steps", step.id, "for_each"), step.id, f"{more} with other items"))

    def _items(self, step: PlannedStep, errors: list[str]) -> list[Any] | None:
        """A fan-out's items when ``for_each`` reads only what is known now (its keys checked too, when they
        can be); None otherwise."""
        assert step.for_each is not None
        if not all(self._known(ref) for ref in step.for_each.references):
            return None
        try:
            items = step.render_items(self._context())
        except TemplateError as exc:
            errors.append(self._error(("steps", step.id, "for_each"), step.id, str(exc)))
            return None
        if step.key is None or all(self._known(r) or r.root in ("item", "index") for r in step.key.references):
            self._check_keys(step, items, errors)
        return items

    def _check_keys(self, step: PlannedStep, items: list[Any], errors: list[str]) -> None:
        """The first item whose key cannot be rendered, or that repeats an earlier item's key, as an error."""
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            try:
                key = step.render_key(self._context(item, index))
            except TemplateError as exc:
                errors.append(self._error(("steps", step.id, "key"), step.id, str(exc)))
                break
            first = seen.setdefault(key, index)
            if first != index:
                text = step.same_key(first, index, key)
                errors.append(self._error(("steps", step.id, "key" if step.key else "for_each"), step.id, text))
                break

    def _render(self, step: PlannedStep, item: Any = None, index: int | None = None) -> Partial:
        """The step's arguments rendered as far as they are known now (with the item, when ``index`` is given)."""

        def known(ref: Reference) -> bool:
            return self._known(ref) or (index is not None and ref.root in ("item", "index"))

        return render_known(step.step.args, self._context(item, index), known, loc=("steps", step.id, "args"))

    def _context(self, item: Any = None, index: int | None = None) -> dict[str, Any]:
        return make_context(inputs=self._inputs, env=self._env, steps={}, item=item, index=index)

    def _known(self, ref: Reference) -> bool:
        return ref.root == "env" or (ref.root == "inputs" and ref.name not in self._unset)

    def _error(self, loc: Loc, sid: str, text: str, *, key: bool = False) -> str:
        """``error: FILE:LINE:COLUMN: step ID: text``, located at ``loc`` (its key, with ``key``) when the plan
        knows where it sits."""
        where = ""
        positions = self._plan.positions
        if positions is not None:
            line, column = positions.locate(loc, at="key" if key else "value")
            if line is not None:
                where = f"{positions.file or '<string>'}:{line}:{column}: "
        return f"error: {where}step {sid}: {text}"


def _problems(partial: Partial, validator: ArgsValidator) -> list[tuple[Loc, str, bool]]:
    """The definite problems of partly rendered arguments, and the templates over known values that failed:
    each as its path inside the arguments, its text, and whether it is about a key."""
    found: list[tuple[Loc, str, bool]] = [(p.path, str(p), p.key) for p in validator.problems(partial.value)]
    found += [(loc[3:], f"{format_path(loc[2:])}: {error}", False) for loc, error in partial.errors]
    return found


def _unlisted(step: PlannedStep, tool: Tool) -> list[str]:
    """Arguments the tool's schema does not name but lets through (most servers ignore them): likely typos."""
    found = unlisted_arguments(step.tool, tool.input_schema, step.step.args)
    return [f"note: step {step.id}: {text}" for text in found]


def _short(item: Any) -> str:
    return cut(canonical_json(item))  # masked, then cut: a secret never shows in part
