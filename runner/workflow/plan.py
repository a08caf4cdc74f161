"""The plan: a checked workflow, its templates compiled, its steps in dependency order.

:func:`build_plan` takes a :class:`~runner.workflow.model.Workflow` (shape already checked) and checks everything
that needs the whole file, collecting every problem before it raises (one
:class:`~runner.errors.WorkflowError`, or :class:`~runner.workflow.positions.WorkflowErrors` listing several):

* a server has exactly one of ``command`` (stdio) and ``url`` (HTTP); ``env``/``env_passthrough``/``cwd`` only
  with a command, ``headers`` only with a url; server templates read only ``inputs`` and ``env``; a literal
  ``url`` is ``http(s)://`` with a host and without credentials (see :func:`runner.workflow.urls.url_problem`);
  each valid server resolved once into a :class:`~runner.workflow.servers.PlannedServer` (stdio or HTTP);
* a step's ``server`` names a server, ``needs`` name steps, ``key``/``concurrency`` only with
  ``for_each``, ``if`` and ``for_each`` are single templates;
* every template compiles, and reads only what exists: ``inputs.<declared>``, ``steps.<id>.<field>``
  with a field the step exposes (``result structured text json status`` for a plain step,
  ``items results status`` for a fan-out), ``item``/``index`` only in a fan-out step's args and key;
* the status functions (``success()``, ``failure()``, ``always()``) appear only in a step's ``if``;
* no step refers to itself, and there is no dependency cycle (each one is named in order).

A step's dependencies are its ``needs`` plus every step its templates (args, key, if, for_each) read.
Layer n (:mod:`runner.workflow.graph`) holds the steps whose dependencies all sit in earlier layers; ``order``
is the layers in turn, each layer in declaration order. Everything here is linear in the size of the
workflow, and iterative (a 10,000-step chain does not reach the recursion limit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from runner.errors import WorkflowError
from runner.workflow import graph
from runner.workflow.expressions import RECONCILE_ROOTS, TemplateSyntaxError, extra_roots, shown_expression
from runner.workflow.keys import default_key
from runner.workflow.model import Server, Step, Workflow
from runner.workflow.positions import Loc, Positions, describe, format_path, raise_errors
from runner.workflow.servers import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_RECONNECT,
    PlannedServer,
    planned_server,
    server_shape_problems,
)
from runner.workflow.status import status_functions_in
from runner.workflow.template import (
    Compiled,
    Occurrence,
    TemplateError,
    compile_value,
    did_you_mean,
    is_truthy,
    render_text,
)
from runner.workflow.urls import url_problem

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_RECONNECT",
    "FANOUT_FIELDS",
    "STEP_FIELDS",
    "OutputFailure",
    "Plan",
    "PlannedReconcile",
    "PlannedServer",
    "PlannedStep",
    "build_plan",
]

STEP_FIELDS: tuple[str, ...] = ("result", "structured", "text", "json", "status")
FANOUT_FIELDS: tuple[str, ...] = ("items", "results", "status")

_Where = Literal["args", "key", "cache_key", "reconcile", "if", "for_each", "outputs", "server"]


@dataclass(frozen=True, slots=True)
class PlannedReconcile:
    """A step's ``reconcile:``, compiled: its ``tool`` (on the step's server), ``args`` and ``done`` templates
    (over ``item``, ``key``, ``index``, ``args`` and, for ``done``, ``result``), and whether the workflow says
    the tool is safe to repeat (``idempotent``; else the server's annotations must, when it is trusted)."""

    tool: str
    args: Compiled
    done: Compiled
    idempotent: bool


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """One step, ready for the scheduler.

    ``timeout`` and ``idle_timeout`` are the effective ones: the step's, else its server's, else the default
    (no hard cap; ``DEFAULT_IDLE_TIMEOUT`` without progress); None when the workflow says ``none``.
    ``referenced`` is True when some template (any step's, or an output) reads this step's results:
    only then must the scheduler keep them in memory. ``status_checks``: the status functions its ``if``
    calls (``success``, ``failure``, ``always``; :mod:`runner.workflow.status`); none means the implicit
    ``success()``.
    """

    id: str
    step: Step
    server: str
    tool: str
    args: Compiled
    condition: Compiled | None
    for_each: Compiled | None
    key: Compiled | None
    fan_out: bool
    concurrency: int | None
    timeout: float | None
    idle_timeout: float | None
    idempotent: bool
    continue_on_error: bool
    layer: int
    dependencies: tuple[str, ...]
    dependents: tuple[str, ...]
    referenced: bool
    status_checks: tuple[str, ...] = ()
    cache: float | None = None  # seconds an earlier run's result may be reused (``cache:``); None: never
    cache_key: Compiled | None = None
    reconcile: PlannedReconcile | None = None

    def render_cache_key(self, context: Mapping[str, Any]) -> Any:
        """The step's ``cache_key`` for ``context`` (None without one); :class:`TemplateError` when it fails."""
        return self.cache_key.render(context) if self.cache_key is not None else None

    def render_args(self, context: Mapping[str, Any]) -> Any:
        """The tool arguments for ``context`` (per item, for a fan-out step)."""
        return self.args.render(context)

    def should_run(self, context: Mapping[str, Any]) -> bool:
        """Whether ``if`` holds (JMESPath truthiness); always True without ``if``. An ``if`` that calls status
        functions is evaluated inside :func:`runner.workflow.status.status_scope`."""
        return self.condition is None or is_truthy(self.condition.render(context))

    def render_items(self, context: Mapping[str, Any]) -> list[Any]:
        """The items of a fan-out step; :class:`TemplateError` when ``for_each`` gives no list."""
        if self.for_each is None:
            raise TemplateError(f"step {self.id!r} is not a fan-out step")
        items = self.for_each.render(context)  # its errors name the file, line and field
        if not isinstance(items, list):
            raise TemplateError(
                f"for_each of step {self.id!r} must give a list, found {describe(items)}",
                expression=_first_expression(self.for_each),
            )
        return items

    def render_key(self, context: Mapping[str, Any], *, full_hash: bool = False) -> str:
        """The identity of ``context["item"]``: the ``key`` template as text, else
        :func:`~runner.workflow.keys.default_key` (``full_hash`` for a run whose journal is of format 1)."""
        if self.key is None:
            return default_key(context["item"], full_hash=full_hash)
        value = self.key.render(context)
        if value is None or value == "":
            raise TemplateError(
                f"key of step {self.id!r} rendered to {describe(value)} for item {context.get('index')}",
                expression=_first_expression(self.key),
            )
        return render_text(value)

    @staticmethod
    def same_key(first: int, index: int, key: str) -> str:
        """The message for two items of a step whose keys are equal (a key must tell items apart); the step is
        named by whoever reports it."""
        return f"items {first} and {index} have the same key {key!r}; give the step a `key` that tells them apart"


@dataclass(frozen=True, slots=True)
class OutputFailure:
    """An output that could not be rendered after the run: its ``name``, the template's error (which names
    the expression's place in the file), and where the output sits in the workflow file."""

    name: str
    error: str
    file: str | None = None
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A valid workflow, ready to run. ``steps`` is in ``order`` (a topological order); ``positions`` locates
    its parts in the file (``plan --check`` reports a bad argument at its line and column)."""

    workflow: Workflow
    steps: Mapping[str, PlannedStep]
    order: tuple[str, ...]
    layers: tuple[tuple[str, ...], ...]
    servers: Mapping[str, PlannedServer]
    outputs: Compiled
    env_names: frozenset[str]
    file: str | None = None
    input_values: Mapping[str, Any] | None = None
    positions: Positions | None = None
    """Where each part sits in the workflow file, for findings and errors found at run time (None for a plan
    built without them)."""

    def render_outputs(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """The ``outputs`` mapping rendered in ``context`` (after the run); the first output that fails raises
        its :class:`TemplateError` (:meth:`render_each_output` keeps the others)."""
        result: dict[str, Any] = self.outputs.render(context)
        return result

    def render_each_output(self, context: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[OutputFailure, ...]]:
        """Each output rendered in ``context`` (after the run) on its own: those that render, and those that
        failed (left out of the first), in the order the workflow lists them. One output reading a result that
        is not what it expected does not take the others with it."""
        where = partial(_where, self.positions) if self.positions is not None else None
        rendered: dict[str, Any] = {}
        failed: list[OutputFailure] = []
        for name, value in self.workflow.outputs.items():
            loc = ("outputs", name)
            try:
                rendered[name] = compile_value(value, loc=loc, where=where).render(context)
            except TemplateError as exc:
                line, column = self.positions.locate(loc) if self.positions is not None else (None, None)
                failed.append(OutputFailure(name, str(exc), file=self.file, line=line, column=column))
        return rendered, tuple(failed)


def _effective(step: float | None, server: float | None, default: float | None) -> float | None:
    """The step's limit, else its server's, else ``default``; ``none`` (infinity) means no limit."""
    value = step if step is not None else server if server is not None else default
    return None if value is None or math.isinf(value) else value


def _status_checks(condition: Compiled | None) -> tuple[str, ...]:
    if condition is None:
        return ()
    names: dict[str, None] = {}
    for text in condition.expressions:
        names.update(dict.fromkeys(status_functions_in(text)))
    return tuple(names)


def _first_expression(compiled: Compiled) -> str | None:
    expressions = compiled.expressions
    return expressions[0] if expressions else None


# ---------------------------------------------------------------------------------------------------
# Building


class _Builder:
    def __init__(self, workflow: Workflow, positions: Positions) -> None:
        self.workflow = workflow
        self.pos = positions
        self.errors: list[WorkflowError] = []
        self.env_names: set[str] = set()
        self.referenced: set[str] = set()
        self.reconciles: dict[str, PlannedReconcile] = {}
        # step id -> {dependency id: loc of the first place that creates the edge}
        self.edges: dict[str, dict[str, Loc]] = {}
        self.step_ids = list(workflow.steps)
        # Kept by every compiled template (the plan's lifetime) and called only when one fails to render: it
        # holds the positions, not this builder.
        self.where = partial(_where, positions)

    def error(self, message: str, loc: Loc, *, suggestion: str | None = None, at: str = "value") -> None:
        self.errors.append(self.pos.error(message, loc, suggestion=suggestion, at="key" if at == "key" else "value"))

    def compile(self, value: Any, loc: Loc) -> Compiled | None:
        try:
            return compile_value(value, loc=loc, where=self.where)
        except TemplateSyntaxError as exc:
            self.error(exc.message, exc.loc, suggestion=exc.suggestion)
            return None

    # -- servers ----------------------------------------------------------------------------------

    def server(self, name: str, server: Server) -> PlannedServer | None:
        loc: Loc = ("servers", name)
        for found in server_shape_problems(server):
            self.error(found.message, (*loc, *found.loc), suggestion=found.suggestion, at=found.at)
        if (server.command is None) == (server.url is None):
            return None  # both or neither: nothing more to check
        url = self.url(server.url, (*loc, "url")) if server.url is not None else None
        headers = self.compile(server.headers, (*loc, "headers")) if server.headers is not None else None
        env = self.compile(server.env, (*loc, "env")) if server.env is not None else None
        for key, compiled in (("url", url), ("headers", headers), ("env", env)):
            if compiled is not None:
                self.check_references(compiled, owner=None, where="server", fan_out=False)
                self.refuse_status_functions(getattr(server, key), compiled, (*loc, key), "server settings")
        return planned_server(name, server, url, headers, env)

    def url(self, text: str, loc: Loc) -> Compiled | None:
        """A server's ``url`` compiled; a literal one checked now (a template's text is checked once rendered)."""
        url = self.compile(text, loc)
        problem = url_problem(text) if url is not None and url.is_constant else None
        if problem is not None:
            self.error(problem[0], loc, suggestion=problem[1])
        return url

    def servers(self) -> dict[str, PlannedServer]:
        """The workflow's servers, each checked and resolved (:mod:`runner.workflow.servers`); those in error left
        out."""
        planned = {name: self.server(name, server) for name, server in self.workflow.servers.items()}
        return {name: server for name, server in planned.items() if server is not None}

    # -- steps ------------------------------------------------------------------------------------

    def step(self, step_id: str, step: Step) -> dict[str, Compiled | None]:
        loc: Loc = ("steps", step_id)
        deps = self.edges.setdefault(step_id, {})
        if step.server not in self.workflow.servers:
            known = ", ".join(self.workflow.servers) or "none declared"
            self.error(
                f"undefined server {step.server!r} (servers: {known})",
                (*loc, "server"),
                suggestion=did_you_mean(step.server, self.workflow.servers),
            )
        self.needs(step_id, step, deps)
        if not step.fan_out:
            for name in ("key", "concurrency"):
                if getattr(step, name) is not None:
                    self.error(f"{name} applies only to fan-out steps (with for_each)", (*loc, name), at="key")
        args = self.compile(step.args, (*loc, "args"))
        key = self.compile(step.key, (*loc, "key")) if step.key is not None else None
        cache_key = self.compile(step.cache_key, (*loc, "cache_key")) if step.cache_key is not None else None
        if step.cache_key is not None and step.cache is None:
            self.error("cache_key applies only to a step with cache (cache: 7d)", (*loc, "cache_key"), at="key")
        condition = self.single(step.if_, (*loc, "if"), "if") if step.if_ is not None else None
        for_each = self.for_each(step, (*loc, "for_each"))
        parts: tuple[tuple[_Where, Compiled | None], ...] = (
            ("args", args),
            ("key", key),
            ("if", condition),
            ("for_each", for_each),
            ("cache_key", cache_key),
        )
        for where, value in parts:
            if value is not None:
                self.check_references(value, owner=step_id, where=where, fan_out=step.fan_out)
        self.refuse_status_functions(step.args, args, (*loc, "args"), "args")
        self.refuse_status_functions(step.key, key, (*loc, "key"), "key")
        self.refuse_status_functions(step.cache_key, cache_key, (*loc, "cache_key"), "cache_key")
        self.reconcile(step_id, step, loc)
        self.refuse_status_functions(step.for_each, for_each, (*loc, "for_each"), "for_each")
        return dict(parts)

    def reconcile(self, step_id: str, step: Step, loc: Loc) -> None:
        """``reconcile:``: its templates (which may also read ``key``, ``args`` and ``result``), and a tool
        declared safe to repeat (a reconcile is asked again after every crash)."""
        spec = step.reconcile
        if spec is None:
            return
        where: Loc = (*loc, "reconcile")
        with extra_roots(RECONCILE_ROOTS):
            args = self.compile(spec.args, (*where, "args"))
            done = self.compile(spec.done, (*where, "done"))
        if done is not None and done.single_expression is None:
            self.error(
                f"done must be a single template like ${{{{ result.json.done }}}}, found {describe(spec.done)}",
                (*where, "done"),
            )
            done = None
        for value, name in ((args, "args"), (done, "done")):
            if value is not None:
                self.check_references(value, owner=step_id, where="reconcile", fan_out=step.fan_out)
                self.refuse_status_functions(getattr(spec, name), value, (*where, name), "reconcile")
        server = self.workflow.servers.get(step.server)
        if not spec.idempotent and not (server is not None and server.trust_annotations):
            self.error(
                f"the reconcile tool {spec.tool!r} must be safe to repeat (it is asked again after every crash): "
                "say idempotent: true under reconcile when it is read-only or idempotent, or trust the server's "
                "annotations (trust_annotations: true)",
                (*where, "tool"),
            )
        if args is not None and done is not None:
            self.reconciles[step_id] = PlannedReconcile(spec.tool, args, done, spec.idempotent)

    def needs(self, step_id: str, step: Step, deps: dict[str, Loc]) -> None:
        """``needs`` names other steps: each becomes an edge, located at its entry."""
        for n, need in enumerate(step.needs):
            loc: Loc = ("steps", step_id, "needs", n)
            if need == step_id:
                self.error(f"step {step_id!r} needs itself", loc)
            elif need not in self.workflow.steps:
                self.error(f"unknown step {need!r} in needs", loc, suggestion=did_you_mean(need, self.workflow.steps))
            else:
                deps.setdefault(need, loc)

    def for_each(self, step: Step, loc: Loc) -> Compiled | None:
        """A single template giving the list, or a literal list (whose entries may hold templates)."""
        if isinstance(step.for_each, str):
            return self.single(step.for_each, loc, "for_each")
        if isinstance(step.for_each, list):
            return self.compile(step.for_each, loc)
        return None

    def refuse_status_functions(self, value: Any, compiled: Compiled | None, loc: Loc, where: str) -> None:
        """Status functions say how a step's dependencies ended: they mean something only in its ``if``."""
        if compiled is None or not any(status_functions_in(text) for text in compiled.expressions):
            return
        for place, text in _template_strings(value, loc):
            for expression in compile_value(text).expressions:
                names = status_functions_in(expression)
                if names:
                    what = " and ".join(f"{name}()" for name in names)
                    are = "is a status function" if len(names) == 1 else "are status functions"
                    self.error(
                        f"{what} {are}, allowed only in a step's if, found in {where}: {shown_expression(expression)}",
                        place,
                        suggestion="to read how a step ended, use steps.<id>.status",
                    )

    def single(self, value: str | bool, loc: Loc, name: str) -> Compiled | None:
        """``if``/``for_each``: a boolean (if only) or exactly one template."""
        compiled = self.compile(value, loc)
        if compiled is None or isinstance(value, bool):
            return compiled
        if compiled.single_expression is None:
            example = "${{ inputs.enabled }}" if name == "if" else "${{ steps.list.json }}"
            self.error(
                f"{name} must be a single template like {example}, found {describe(value)}",
                loc,
            )
            return None
        return compiled

    # -- references -------------------------------------------------------------------------------

    def check_references(self, compiled: Compiled, *, owner: str | None, where: _Where, fan_out: bool) -> None:
        for occurrence in compiled.occurrences:
            self.reference(occurrence, owner=owner, where=where, fan_out=fan_out)

    def reference(self, occ: Occurrence, *, owner: str | None, where: _Where, fan_out: bool) -> None:
        root, name, _field = occ.reference
        if root in ("env", "inputs"):
            self.outer_reference(occ)
        elif where == "server":
            self.error(f"server settings may read only inputs and env, found {root} in {_shown(occ)}", occ.loc)
        elif root in RECONCILE_ROOTS:
            return  # compiled only inside extra_roots: a reconcile template's own
        elif root in ("item", "index"):
            if not (fan_out and where in ("args", "key", "cache_key", "reconcile")):
                self.error(f"{root} is not defined here: {_shown(occ)}", occ.loc, suggestion=_item_hint(where, fan_out))
        else:
            # root == "steps"; name is never None here (the template compiler refuses that).
            assert name is not None
            self.step_reference(occ, name, owner)

    def outer_reference(self, occ: Occurrence) -> None:
        """``env.NAME`` (noted: only those are read from the environment) or ``inputs.NAME`` (declared)."""
        root, name, _field = occ.reference
        if name is None:
            return
        if root == "env":
            self.env_names.add(name)
        elif name not in self.workflow.inputs:
            known = ", ".join(self.workflow.inputs) or "none declared"
            self.error(
                f"unknown input {name!r} in {_shown(occ)} (inputs: {known})",
                occ.loc,
                suggestion=did_you_mean(name, self.workflow.inputs),
            )

    def step_reference(self, occ: Occurrence, name: str, owner: str | None) -> None:
        """``steps.NAME.field``: another step, and a field it exposes; an edge from ``owner`` to it."""
        field = occ.reference[2]
        if name == owner:
            self.error(f"step {owner!r} refers to itself in {_shown(occ)}", occ.loc)
            return
        target = self.workflow.steps.get(name)
        if target is None:
            suggestion = did_you_mean(name, self.workflow.steps)
            self.error(f"unknown step {name!r} in {_shown(occ)}", occ.loc, suggestion=suggestion)
            return
        fields = FANOUT_FIELDS if target.fan_out else STEP_FIELDS
        if field is not None and field not in fields:
            kind = "a fan-out step" if target.fan_out else "a step"
            self.error(
                f"unknown field {field!r} in {_shown(occ)}: {kind} has {', '.join(fields)}",
                occ.loc,
                suggestion=_field_hint(name, field, fields, target.fan_out),
            )
            return
        self.referenced.add(name)
        if owner is not None:
            self.edges[owner].setdefault(name, occ.loc)

    # -- the graph --------------------------------------------------------------------------------

    def layers(self) -> list[list[str]]:
        """The steps in layers (:func:`runner.workflow.graph.layers`); each cycle that keeps some out reported."""
        found, cycles = graph.layers(self.step_ids, self.edges)
        for cycle in cycles:
            text = " -> ".join([*cycle, cycle[0]])
            self.error(
                f"dependency cycle: {text}",
                ("steps", cycle[0]),
                at="key",
                suggestion="each step needs the next one; remove one of these dependencies",
            )
        return found


def _shown(occ: Occurrence) -> str:
    return f"${{{{ {occ.expression} }}}}"


def _where(positions: Positions, loc: Loc) -> str:
    """``file:line:column: path`` of ``loc``, for errors raised while rendering a template found there."""
    line, column = positions.locate(loc)
    place = ":".join(str(part) for part in (positions.file, line, column) if part is not None)
    return ": ".join(part for part in (place, format_path(loc)) if part)


def _template_strings(value: Any, loc: Loc) -> list[tuple[Loc, str]]:
    """The strings of ``value`` (at any depth) that hold a template, with where each one is."""
    found: list[tuple[Loc, str]] = []
    stack: list[tuple[Loc, Any]] = [(loc, value)]
    while stack:
        where, current = stack.pop()
        if isinstance(current, str):
            if "${{" in current:
                found.append((where, current))
        elif isinstance(current, dict):
            stack.extend(((*where, k), v) for k, v in reversed(current.items()))
        elif isinstance(current, list):
            stack.extend(((*where, n), v) for n, v in reversed(list(enumerate(current))))
    return found


def _item_hint(where: _Where, fan_out: bool) -> str:
    if where in ("if", "for_each"):
        return f"{where} is evaluated once for the whole step; item and index exist only in its args and key"
    if where == "outputs":
        return "outputs are rendered after the run; read items through steps.<id>.items or .results"
    return "item and index exist only in the args and key of a step with for_each"


def _field_hint(name: str, field: str, fields: tuple[str, ...], fan_out: bool) -> str | None:
    if fan_out and field in STEP_FIELDS:
        return f"{name} is a fan-out step: use steps.{name}.results[*].{field}"
    if not fan_out and field in FANOUT_FIELDS:
        return f"{name} has no for_each: use steps.{name}.{STEP_FIELDS[2]} or .json"
    return did_you_mean(field, fields)


def build_plan(workflow: Workflow, positions: Positions | None = None) -> Plan:
    """Check ``workflow`` as a whole and plan it; raise a WorkflowError listing every problem found.

    ``positions`` (from :mod:`runner.workflow.loader`) locates errors in the file; without it errors carry only
    the key path.
    """
    builder = _Builder(workflow, positions or Positions())
    servers = builder.servers()
    compiled_steps = {step_id: builder.step(step_id, step) for step_id, step in workflow.steps.items()}
    outputs = builder.compile(workflow.outputs, ("outputs",))
    if outputs is not None:
        builder.check_references(outputs, owner=None, where="outputs", fan_out=False)
        builder.refuse_status_functions(workflow.outputs, outputs, ("outputs",), "outputs")
    layers = builder.layers()
    raise_errors(builder.errors)
    assert outputs is not None

    order = [step_id for layer in layers for step_id in layer]
    planned_steps = _planned_steps(workflow, builder, compiled_steps, layers, order)
    return Plan(
        workflow=workflow,
        steps=planned_steps,
        order=tuple(order),
        layers=tuple(tuple(layer) for layer in layers),
        servers=servers,
        outputs=outputs,
        env_names=frozenset(builder.env_names),
        file=positions.file if positions is not None else None,
        positions=positions,
    )


def _planned_steps(
    workflow: Workflow,
    builder: _Builder,
    compiled_steps: Mapping[str, Mapping[str, Compiled | None]],
    layers: list[list[str]],
    order: list[str],
) -> dict[str, PlannedStep]:
    """Each step of a valid workflow, in ``order``, with its effective limits and its place in the graph."""
    layer_of = {step_id: n for n, layer in enumerate(layers) for step_id in layer}
    position = {step_id: n for n, step_id in enumerate(order)}
    dependents = graph.dependents(order, builder.edges)
    planned_steps: dict[str, PlannedStep] = {}
    for step_id in order:
        step = workflow.steps[step_id]
        parts = compiled_steps[step_id]
        server = workflow.servers[step.server]
        args = parts["args"]
        assert args is not None
        planned_steps[step_id] = PlannedStep(
            id=step_id,
            step=step,
            server=step.server,
            tool=step.tool,
            args=args,
            condition=parts["if"],
            for_each=parts["for_each"],
            key=parts["key"],
            fan_out=step.fan_out,
            concurrency=step.concurrency,
            timeout=_effective(step.timeout, server.timeout, None),
            idle_timeout=_effective(step.idle_timeout, server.idle_timeout, DEFAULT_IDLE_TIMEOUT),
            idempotent=step.idempotent,
            continue_on_error=step.continue_on_error,
            layer=layer_of[step_id],
            dependencies=tuple(sorted(builder.edges[step_id], key=position.__getitem__)),
            dependents=tuple(dependents[step_id]),
            referenced=step_id in builder.referenced,
            status_checks=_status_checks(parts["if"]),
            cache=step.cache,
            cache_key=parts["cache_key"],
            reconcile=builder.reconciles.get(step_id),
        )
    return planned_steps
