"""The planner: dependencies, layers, references, cycles, the rendering helpers and the plan text."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import WorkflowError
from runner.workflow.context import fanout_view, item_entry, make_context, step_view
from runner.workflow.keys import default_key
from runner.workflow.model import Workflow
from runner.workflow.plan import Plan, build_plan
from runner.workflow.plantext import render_plan_text
from runner.workflow.positions import WorkflowErrors
from runner.workflow.servers import HttpServer, StdioServer
from runner.workflow.template import TemplateError
from runner.workflow.urls import url_problem

SERVERS = {"fs": {"command": ["server-fs"], "timeout": "30s"}, "web": {"url": "http://localhost/mcp"}}


def plan(steps: dict[str, Any], **extra: Any) -> Plan:
    data = {"version": 1, "servers": SERVERS, "steps": steps, **extra}
    return build_plan(Workflow.model_validate(data))


def call(**fields: Any) -> dict[str, Any]:
    return {"server": "fs", "tool": "t", **fields}


def problems(steps: dict[str, Any], **extra: Any) -> list[str]:
    with pytest.raises(WorkflowError) as info:
        plan(steps, **extra)
    errors = info.value.errors if isinstance(info.value, WorkflowErrors) else [info.value]
    return [str(error) for error in errors]


class TestGraph:
    def test_dependencies_from_needs_and_templates(self) -> None:
        p = plan(
            {
                "c": call(args={"x": "${{ steps.a.text }}"}, needs=["b"]),
                "a": call(),
                "b": call(**{"if": "${{ steps.a.status == 'succeeded' }}"}),
                "d": call(for_each="${{ steps.c.json }}", key="${{ steps.a.text }}-${{ item }}"),
                "e": call(),
            }
        )
        assert p.layers == (("a", "e"), ("b",), ("c",), ("d",))
        assert p.order == ("a", "e", "b", "c", "d")
        assert list(p.steps) == list(p.order)
        assert p.steps["c"].dependencies == ("a", "b")
        assert p.steps["a"].dependents == ("b", "c", "d")
        assert p.steps["d"].dependencies == ("a", "c")
        assert [p.steps[s].layer for s in p.order] == [0, 0, 1, 2, 3]

    def test_referenced_only_when_a_template_reads_results(self) -> None:
        p = plan(
            {"a": call(), "b": call(needs=["a"]), "c": call(), "d": call()},
            outputs={"x": {"deep": ["${{ steps.c.status }}"]}},
        )
        assert {s.id: s.referenced for s in p.steps.values()} == {"a": False, "b": False, "c": True, "d": False}

    def test_env_names_from_everywhere(self) -> None:
        servers = {
            "fs": {"command": ["x"], "env": {"K": "${{ env.FS_KEY }}"}},
            "web": {"url": "${{ env.URL }}", "headers": {"A": "Bearer ${{ env.TOKEN }}"}},
        }
        data = {
            "version": 1,
            "servers": servers,
            "steps": {"a": call(args={"p": "${{ env.HOME }}"})},
            "outputs": {"o": "${{ env.USER }}"},
        }
        p = build_plan(Workflow.model_validate(data))
        assert p.env_names == {"FS_KEY", "URL", "TOKEN", "HOME", "USER"}
        assert p.servers["web"].transport == "http" and p.servers["fs"].transport == "stdio"

    def test_effective_timeouts(self) -> None:
        p = plan({"a": call(), "b": call(timeout=5), "c": {"server": "web", "tool": "t"}})
        assert (p.steps["a"].timeout, p.steps["b"].timeout, p.steps["c"].timeout) == (30.0, 5.0, None)

    def test_idle_timeout_has_a_default_and_none_opts_out(self) -> None:
        p = plan(
            {
                "a": call(),
                "b": call(idle_timeout="2m"),
                "c": call(idle_timeout="none"),
                "d": call(timeout="none"),
                "e": {"server": "web", "tool": "t"},
            },
            servers={**SERVERS, "web": {"url": "http://localhost/mcp", "idle_timeout": "none"}},
        )
        idle = {sid: s.idle_timeout for sid, s in p.steps.items()}
        assert idle == {"a": 300.0, "b": 120.0, "c": None, "d": 300.0, "e": None}
        assert p.steps["d"].timeout is None  # `none` beats the server's 30s
        text = render_plan_text(p)
        assert "idle timeout 2m" in text and text.count("no idle timeout") == 2

    def test_server_connect_timeout_and_reconnect_budget(self) -> None:
        servers = {"fs": {"command": ["x"], "connect_timeout": "5s", "reconnect": False}, "web": {"url": "http://h/m"}}
        p = plan({"a": call()}, servers=servers)
        assert (p.servers["fs"].server.connect_timeout, p.servers["fs"].server.reconnect) == (5.0, 0.0)
        assert (p.servers["web"].server.connect_timeout, p.servers["web"].server.reconnect) == (None, None)
        # resolved once: the server's bound, else the run's, else the default; reconnect 0 is a value, not unset
        fs, web = p.servers["fs"], p.servers["web"]
        assert (fs.connect_within(12.0), fs.reconnect) == (5.0, 0.0)
        assert (web.connect_within(12.0), web.connect_within(), web.reconnect) == (12.0, 30.0, 300.0)
        # `none` is written back as `none` (fingerprints and the schema stay JSON)
        assert (
            Workflow.model_validate(
                {"version": 1, "servers": {"fs": {"command": ["x"], "idle_timeout": "none"}}, "steps": {}}
            )
            .servers["fs"]
            .model_dump(mode="json")["idle_timeout"]
            == "none"
        )

    def test_a_server_resolves_into_one_of_two_kinds(self) -> None:
        servers = {
            "fs": {"command": ["x", "-v"], "cwd": "sub", "env_passthrough": ["HOME"], "env": {"K": "${{ env.K }}"}},
            "web": {"url": "${{ env.URL }}", "headers": {"A": "b"}, "transport": "sse", "max_concurrency": 2},
        }
        p = plan({"a": call()}, servers=servers)
        fs, web = p.servers["fs"].connection, p.servers["web"].connection
        assert isinstance(fs, StdioServer) and isinstance(web, HttpServer)
        assert (fs.command, fs.cwd, fs.env_passthrough, fs.kind) == (("x", "-v"), "sub", ("HOME",), "stdio")
        assert fs.env is not None and fs.env.render(make_context(inputs={}, env={"K": "v"}, steps={})) == {"K": "v"}
        assert (web.transport, web.auth, web.kind, p.servers["web"].max_concurrency) == ("sse", None, "http", 2)
        assert web.url.render(make_context(inputs={}, env={"URL": "http://h/m"}, steps={})) == "http://h/m"
        assert p.servers["web"].tasks and not p.servers["web"].trust_annotations
        default = plan({"a": call()}).servers["web"].connection
        assert isinstance(default, HttpServer) and default.transport == "auto"

    def test_a_ten_thousand_step_chain(self) -> None:
        n = 10_000
        steps = {"s0": call()}
        for i in range(1, n):
            steps[f"s{i}"] = call(args={"prev": f"${{{{ steps.s{i - 1}.text }}}}"})
        p = plan(steps)
        assert len(p.layers) == n
        assert p.order == tuple(f"s{i}" for i in range(n))
        assert p.steps["s9999"].dependencies == ("s9998",)

    def test_a_ten_thousand_step_chain_with_a_cycle_at_the_end(self) -> None:
        n = 10_000
        steps = {f"s{i}": call(needs=[f"s{i + 1}"]) for i in range(n - 1)}
        steps[f"s{n - 1}"] = call(needs=["s0"])
        [message] = problems(steps)
        assert message.startswith("steps.s0: dependency cycle: s0 -> s1 -> s2 -> ")
        assert message.split("\n")[0].endswith(f"s{n - 1} -> s0")

    def test_a_wide_dag(self) -> None:
        width = 5_000
        steps: dict[str, Any] = {"root": call()}
        steps.update({f"w{i}": call(args={"r": "${{ steps.root.json }}"}) for i in range(width)})
        steps["join"] = call(needs=[f"w{i}" for i in range(width)])
        p = plan(steps)
        assert [len(layer) for layer in p.layers] == [1, width, 1]
        assert len(p.steps["root"].dependents) == width
        assert len(p.steps["join"].dependencies) == width

    @given(st.integers(min_value=1, max_value=40), st.randoms(use_true_random=False))
    def test_random_dags_respect_every_dependency(self, n: int, rng: random.Random) -> None:
        steps: dict[str, Any] = {}
        for i in range(n):
            deps = rng.sample(range(i), k=min(i, rng.randint(0, 3)))
            names = [f"s{d}" for d in deps]
            rng.shuffle(names)
            steps[f"s{i}"] = call(needs=names[:1], args={"x": [f"${{{{ steps.{d}.json }}}}" for d in names[1:]]})
        shuffled = list(steps.items())
        rng.shuffle(shuffled)
        p = plan(dict(shuffled))
        position = {step_id: k for k, step_id in enumerate(p.order)}
        assert sorted(p.order) == sorted(steps)
        for step in p.steps.values():
            for dep in step.dependencies:
                assert position[dep] < position[step.id]
                assert p.steps[dep].layer < step.layer
                assert step.id in p.steps[dep].dependents
            assert step.layer == (max((p.steps[d].layer for d in step.dependencies), default=-1) + 1)


class TestProblems:
    def test_every_cycle_is_named(self) -> None:
        found = problems({
            "a": call(needs=["b"]), "b": call(needs=["a"]),
            "c": call(args={"x": "${{ steps.d.text }}"}), "d": call(needs=["c"]), "e": call(needs=["d"]),
        })  # fmt: skip
        assert [m.split("\n")[0] for m in found] == [
            "steps.a: dependency cycle: a -> b -> a",
            "steps.c: dependency cycle: c -> d -> c",
        ]

    def test_self_references(self) -> None:
        assert problems({"a": call(needs=["a"])}) == ["steps.a.needs[0]: step 'a' needs itself"]
        assert problems({"a": call(key="${{ item }}", for_each="${{ steps.a.items }}")}) == [
            "steps.a.for_each: step 'a' refers to itself in ${{ steps.a.items }}",
        ]

    @pytest.mark.parametrize(
        ("steps", "message"),
        [
            ({"a": call(), "b": call(args={"x": "${{ steps.a.items }}"})},
             "unknown field 'items' in ${{ steps.a.items }}: a step has result, structured, text, json, status"),
            ({"a": call(**{"if": "maybe"})}, "if must be a single template like ${{ inputs.enabled }}, found a string"),
            ({"a": call(**{"if": "${{ inputs.x }} and ${{ inputs.y }}"})}, "if must be a single template"),
            ({"a": call(concurrency=2)}, "concurrency applies only to fan-out steps (with for_each)"),
            ({"a": call(needs=["zz"])}, "unknown step 'zz' in needs"),
            ({"a": call(args={"i": "${{ index }}"})}, "index is not defined here: ${{ index }}"),
            ({"a": call(for_each=[1], **{"if": "${{ item }}"})}, "item is not defined here: ${{ item }}"),
            ({"a": call(args={"x": ["${{ success() }}"]})},
             "steps.a.args.x[0]: success() is a status function, allowed only in a step's if, found in args"),
            ({"a": call(for_each=[1], key="k-${{ always() }}")},
             "steps.a.key: always() is a status function, allowed only in a step's if, found in key"),
            ({"a": call(**{"if": "${{ failure(`1`) }}"})}, "failure() takes 0 arguments, found 1"),
            ({"a": call(**{"if": "${{ cancelled() }}"})}, "unknown function cancelled()"),
        ],
    )  # fmt: skip
    def test_step_problems(self, steps: dict[str, Any], message: str) -> None:
        [found] = problems(steps)
        assert message in found

    def test_status_functions_only_in_if(self) -> None:
        p = plan({
            "a": call(**{"if": "${{ !failure() && !(inputs.x) }}"}), "b": call(**{"if": "${{ inputs.x }}"}),
            "c": call(**{"if": "${{ always() || failure() || always() }}"}), "d": call(**{"if": True}), "e": call(),
        }, inputs={"x": {"type": "boolean", "default": False}})  # fmt: skip
        assert [p.steps[s].status_checks for s in "abcde"] == [("failure",), (), ("always", "failure"), (), ()]
        [found] = problems({"a": call()}, outputs={"o": "${{ length(steps.a.text) }} ${{ always() }}"})
        assert found.startswith("outputs.o: always() is a status function, allowed only in a step's if")
        data = {"version": 1, "servers": {"s": {"url": "http://h/${{ success() }}"}}, "steps": {}}
        with pytest.raises(WorkflowError, match=r"servers\.s\.url: success\(\) is a status function"):
            build_plan(Workflow.model_validate(data))

    def test_outputs_cannot_read_items(self) -> None:
        [found] = problems({"a": call()}, outputs={"o": "${{ item }}"})
        assert found.startswith("outputs.o: item is not defined here")

    @pytest.mark.parametrize(
        ("server", "message"),
        [
            ({"command": ["x"], "url": "http://h"}, "a server has either command (stdio) or url (HTTP), found both"),
            ({"max_concurrency": 2}, "a server needs command (stdio) or url (HTTP), found neither"),
            ({"url": "http://h", "env": {"A": "b"}}, "servers.s.env: env applies only to stdio servers (command)"),
            ({"url": "http://h", "cwd": "/"}, "servers.s.cwd: cwd applies only to stdio servers (command)"),
            ({"command": ["x"], "headers": {"A": "b"}}, "headers applies only to HTTP servers (url)"),
            ({"url": "ftp://h"}, "expected an http:// or https:// URL, found 'ftp://h'"),
            ({"url": "https://bot:pw@h/mcp"}, "servers.s.url: the URL carries credentials (user:password@)"),
            ({"url": "https://bot@h/mcp"}, "servers.s.url: the URL carries credentials (user:password@)"),
            ({"url": "http://"}, "servers.s.url: the URL has no host: 'http://'"),
            ({"url": "http://h:port/mcp"}, "servers.s.url: invalid URL 'http://h:port/mcp'"),
            ({"command": ["${{ env.X }}"]}, "servers.s.command[0]: templates are not allowed in command"),
            ({"url": "http://h/${{ item }}"}, "server settings may read only inputs and env, found item"),
            ({"url": "http://h/${{ inputs.nope }}"}, "unknown input 'nope'"),
        ],
    )  # fmt: skip
    def test_server_problems(self, server: dict[str, Any], message: str) -> None:
        data = {"version": 1, "servers": {"s": server}, "steps": {}}
        with pytest.raises(WorkflowError) as info:
            build_plan(Workflow.model_validate(data))
        assert message in str(info.value)


def test_url_problems_never_repeat_credentials_or_queries() -> None:
    for url in ("https://bot:hunter2@h/mcp", "ftp://bot:hunter2@h/x?token=hunter2", "h:x@y:1/?q=hunter2"):
        problem = url_problem(url)
        assert problem is not None
        assert "hunter2" not in " ".join(p or "" for p in problem)
    assert url_problem("https://bot:hunter2@h/mcp") == (
        "the URL carries credentials (user:password@); URLs are shown and logged, so mcp-run refuses them",
        "write 'https://h/mcp' and put credentials in a header, from the environment: "
        'headers: {Authorization: "Bearer ${{ env.TOKEN }}"}',
    )
    assert url_problem("HTTPS://Example.com:8443/mcp") is None
    assert url_problem("http://[::1]:8000/mcp") is None


class TestRendering:
    def test_fan_out_helpers(self) -> None:
        p = plan(
            {
                "ls": call(),
                "conv": call(
                    for_each="${{ steps.ls.json }}",
                    key="${{ item.name }}",
                    args={"path": "${{ item.name }}", "n": "${{ index }}"},
                    **{"if": "${{ steps.ls.status == 'succeeded' }}"},
                ),
                "plain": call(for_each=["x", {"y": 1}]),
            }
        )
        ls = step_view({"content": [{"type": "text", "text": '[{"name": "a.md"}, {"name": "b.md"}]'}]})
        context = make_context(inputs={}, env={}, steps={"ls": ls})
        conv = p.steps["conv"]
        assert conv.fan_out and conv.should_run(context)
        items = conv.render_items(context)
        assert items == [{"name": "a.md"}, {"name": "b.md"}]
        per_item = make_context(inputs={}, env={}, steps={"ls": ls}, item=items[1], index=1)
        assert conv.render_args(per_item) == {"path": "b.md", "n": 1}
        assert conv.render_key(per_item) == "b.md"
        plain = p.steps["plain"]
        assert plain.render_items(context) == ["x", {"y": 1}]
        assert plain.render_key({**context, "item": {"y": 1}}) == default_key({"y": 1})
        assert plain.render_key({**context, "item": "x"}) == "x"
        assert plain.render_key({**context, "item": "x"}, full_hash=True) == default_key("x", full_hash=True)

    def test_render_failures_are_template_errors(self) -> None:
        p = plan({"ls": call(), "conv": call(for_each="${{ steps.ls.text }}", key="${{ item.k }}")})
        ls = step_view({"content": [{"type": "text", "text": "not a list"}]})
        context = make_context(inputs={}, env={}, steps={"ls": ls})
        with pytest.raises(TemplateError, match="for_each of step 'conv' must give a list, found a string"):
            p.steps["conv"].render_items(context)
        with pytest.raises(TemplateError, match="key of step 'conv' rendered to null for item 0"):
            p.steps["conv"].render_key({**context, "item": {}, "index": 0})

    def test_outputs(self) -> None:
        p = plan({"c": call(for_each=["a"])}, outputs={"n": "${{ length(steps.c.items) }}", "fixed": [1]})
        view = fanout_view(["a"], [item_entry("failed", "boom")], "failed")
        assert p.render_outputs(make_context(inputs={}, env={}, steps={"c": view})) == {"n": 1, "fixed": [1]}

    def test_each_output_renders_on_its_own(self) -> None:
        outputs = {"n": "${{ length(steps.c.items) }}", "bad": "${{ abs(steps.c.status) }}", "fixed": [1]}
        p = plan({"c": call(for_each=["a"])}, outputs=outputs)
        view = fanout_view(["a"], [item_entry("failed", "boom")], "failed")
        rendered, failed = p.render_each_output(make_context(inputs={}, env={}, steps={"c": view}))
        assert rendered == {"n": 1, "fixed": [1]}
        assert [(f.name, f.file) for f in failed] == [("bad", p.file)]
        assert failed[0].error.startswith("${{ abs(steps.c.status) }}: "), failed[0].error

    def test_plan_text(self) -> None:
        p = plan(
            {
                "ls": call(idempotent=True),
                "conv": {"server": "web", "tool": "convert", "for_each": "${{ steps.ls.json }}", "concurrency": 4},
            },
            name="demo",
            outputs={"o": "${{ steps.conv.status }}"},
        )
        text = render_plan_text(p)
        assert text.splitlines()[0] == "demo: 2 steps in 2 layers"
        assert "layer 1:\n  ls    fs/t\n" in text
        assert "fan-out over ${{ steps.ls.json }}, concurrency 4" in text
        assert "needs ls" in text
        assert "idempotent: retried when the outcome is unknown" in text
        assert "not idempotent" in text
        assert "outputs: o" in text
