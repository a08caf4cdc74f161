"""``mcp-run plan --check`` in process, against fake servers over real pipes: one exit code per outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main
from runner.workflow import argcheck
from tests.fakes import fake_command

DIES = ["sh", "-c", "echo 'fatal: no config' >&2; exit 3"]


def workflow(tmp_path: Path, servers: dict[str, list[str]], steps: dict[str, tuple[str, str]]) -> str:
    lines = ["version: 1", "servers:"]
    lines += [f"  {name}: {{command: {json.dumps(command)}}}" for name, command in servers.items()]
    lines += ["steps:"]
    lines += [
        f"  {sid}: {{server: {server}, tool: {tool}, args: {{text: hi}}}}" for sid, (server, tool) in steps.items()
    ]
    path = tmp_path / "flow.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def check(path: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["plan", "--check", path])
    return code, capsys.readouterr().err.splitlines()


def test_a_server_that_cannot_start_is_unreachable_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workflow(tmp_path, {"dead": DIES}, {"a": ("dead", "echo")})
    assert check(path, capsys) == (
        4,
        [
            "mcp-run: error: cannot check the plan: server dead: could not initialize: server exited with code 3",
            "  server stderr (last lines):",
            "    fatal: no config",
        ],
    )


def test_findings_on_the_servers_that_answered_come_with_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = {"dead": DIES, "modes": fake_command("mcp_modes", "ok")}
    path = workflow(tmp_path, servers, {"a": ("dead", "echo"), "b": ("modes", "echo")})
    code, lines = check(path, capsys)
    assert code == 4
    assert lines == [
        "mcp-run: error: cannot check the plan: server dead: could not initialize: server exited with code 3",
        "  server stderr (last lines):",
        "    fatal: no config",
        "note: step b: echo has no annotations (nothing says it is safe)",
    ]


def test_errors_in_the_plan_itself_win_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = {"dead": DIES, "modes": fake_command("mcp_modes", "ok")}
    path = workflow(tmp_path, servers, {"a": ("dead", "echo"), "b": ("modes", "ecoh")})
    code, lines = check(path, capsys)
    assert code == 2
    assert lines == [
        "error: server dead: could not initialize: server exited with code 3",
        "  server stderr (last lines):",
        "    fatal: no config",
        f"error: {path}:7:28: step b: server modes has no tool 'ecoh'; did you mean 'echo'?",
    ]


def test_a_server_that_breaks_the_protocol_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workflow(tmp_path, {"old": fake_command("mcp_modes", "bad-version")}, {"a": ("old", "echo")})
    code, lines = check(path, capsys)
    assert code == 3
    assert lines[0].startswith("mcp-run: error: cannot check the plan: server old: server chose protocol version")


def test_every_server_reached_and_nothing_wrong_is_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workflow(tmp_path, {"modes": fake_command("mcp_modes", "ok")}, {"a": ("modes", "echo")})
    assert check(path, capsys) == (
        0,
        ["note: step a: echo has no annotations (nothing says it is safe)", "ok: 1 step checked against 1 server"],
    )


# -- arguments, as far as they are known before the run -------------------------------------------------------

TYPED = fake_command("mcp_modes", "typed")


def typed_workflow(tmp_path: Path, body: str, inputs: str = "") -> str:
    """A workflow on the ``typed`` fake (tools ``convert``, ``get_current_time``, ``convert_time``, ``broken``,
    ``backtracks``)."""
    path = tmp_path / "flow.yaml"
    text = f"version: 1\nservers:\n  t: {{command: {json.dumps(TYPED)}}}\n"
    if inputs:
        text += "inputs:\n" + inputs
    path.write_text(text + "steps:\n" + body)
    return str(path)


def test_a_fan_out_with_a_static_argument_of_the_wrong_type_is_reported_at_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = typed_workflow(
        tmp_path,
        """\
  list: {server: t, tool: convert_time, args: {}}
  convert:
    server: t
    tool: convert
    for_each: ${{ steps.list.json }}
    args:
      path: ${{ item }}
      out_dir: 3
""",
    )
    assert check(path, capsys) == (
        2,
        [
            f"error: {path}:12:16: step convert: args.out_dir: 3 is not of type 'string'",
            "note: step convert: args.path depends on the item; checked at run time",
        ],
    )


def test_required_unexpected_and_text_templates_are_checked_beside_unknown_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = typed_workflow(
        tmp_path,
        """\
  list: {server: t, tool: convert_time, args: {}}
  convert:
    server: t
    tool: convert
    for_each: ${{ steps.list.json }}
    args:
      pth: ${{ item }}
      count: "n-${{ item }}"
""",
    )
    assert check(path, capsys) == (
        2,
        [
            f"error: {path}:10:5: step convert: args: missing required argument 'path' (a string)",
            f"error: {path}:10:5: step convert: args: missing required argument 'out_dir' (a string)",
            f"error: {path}:12:14: step convert: args.count: 'n-${{{{ item }}}}' is text, not of type 'integer'",
            f"error: {path}:11:7: step convert: args.pth: unexpected argument 'pth'; did you mean 'path'?",
        ],
    )


def test_a_for_each_over_inputs_is_rendered_and_each_item_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = typed_workflow(
        tmp_path,
        """\
  convert:
    server: t
    tool: convert
    for_each: ${{ inputs.files }}
    args: {path: "${{ item.name }}", out_dir: out, count: "${{ item.n }}"}
""",
        inputs="  files: {type: array, default: [{name: a, n: 1}, {name: b, n: 0}, {name: 7, n: 2}]}\n",
    )
    assert check(path, capsys) == (
        2,
        [
            f'error: {path}:11:59: step convert: item 1 ({{"n":0,"name":"b"}}): '
            "args.count: 0 is less than the minimum of 1",
            f'error: {path}:11:18: step convert: item 2 ({{"n":2,"name":7}}): args.path: 7 is not of type \'string\'',
        ],
    )


def test_what_cannot_be_known_before_the_run_is_listed_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = typed_workflow(
        tmp_path,
        """\
  list: {server: t, tool: convert_time, args: {}}
  convert:
    server: t
    tool: convert
    args: {path: "${{ steps.list.text }}", out_dir: "${{ inputs.out }}"}
""",
        inputs="  out: {type: string}\n",
    )
    assert check(path, capsys) == (
        0,
        [
            "note: step convert: args.path depends on step list; checked at run time",
            "note: step convert: args.out_dir depends on input 'out', which has no value here; checked at run time",
            "ok: 2 steps checked against 1 server",
        ],
    )
    code = main(["plan", "--check", path, "--input", "out=7"])
    assert code == 0  # an input given on the command line is a string: out_dir is a string
    assert capsys.readouterr().err.splitlines()[:1] == [
        "note: step convert: args.path depends on step list; checked at run time"
    ]


def test_an_unknown_tool_gets_the_closest_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = typed_workflow(tmp_path, "  now: {server: t, tool: get_time, args: {timezone: UTC}}\n")
    assert check(path, capsys) == (
        2,
        [f"error: {path}:5:26: step now: server t has no tool 'get_time'; did you mean 'get_current_time'?"],
    )


def test_a_tool_whose_schema_is_invalid_is_noted_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = typed_workflow(tmp_path, "  b: {server: t, tool: broken, args: {a: 1}}\n")
    code, lines = check(path, capsys)
    assert code == 0
    assert lines == [
        "note: step b: arguments not checked: tool broken: its inputSchema is not a valid JSON Schema: "
        "properties.a.type: 'bogus' is not valid under any of the given schemas",
        "ok: 1 step checked against 1 server",
    ]


def test_a_pattern_that_backtracks_too_much_is_noted_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(argcheck, "PATTERN_TIMEOUT", 0.001)
    path = typed_workflow(tmp_path, f"  b: {{server: t, tool: backtracks, args: {{text: {'x' * 5000}}}}}\n")
    code, lines = check(path, capsys)
    assert code == 0
    assert lines == [
        "note: step b: arguments not checked: tool backtracks: its inputSchema's pattern '(x+x+)+y' was stopped "
        "after 0.001 s on a text of 5,000 characters (it backtracks too much)",
        "ok: 1 step checked against 1 server",
    ]


def test_an_argument_the_schema_lets_through_but_does_not_name_is_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = typed_workflow(
        tmp_path, "  now: {server: t, tool: get_current_time, args: {timezone: UTC, time_zone: UTC}}\n"
    )
    assert check(path, capsys) == (
        0,
        [
            "note: step now: args.time_zone is not an argument of get_current_time; did you mean 'timezone'?",
            "ok: 1 step checked against 1 server",
        ],
    )


def test_secret_values_in_findings_are_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H9_TOKEN", "hunter2-secret")
    path = typed_workflow(
        tmp_path, "  c: {server: t, tool: convert, args: {path: a, out_dir: b, count: '${{ env.H9_TOKEN }}'}}\n"
    )
    code, lines = check(path, capsys)
    assert code == 2
    assert lines == [f"error: {path}:5:68: step c: args.count: '***env.H9_TOKEN***' is not of type 'integer'"]


def test_many_bad_items_show_five_problems_and_count_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = typed_workflow(
        tmp_path,
        """\
  convert:
    server: t
    tool: convert
    for_each: ${{ inputs.files }}
    args: {path: "${{ item }}", out_dir: out}
""",
        inputs="  files: {type: array, default: [1, 2, 3, 4, 5, 6, 7, 8]}\n",
    )
    code, lines = check(path, capsys)
    assert code == 2
    assert lines == [
        *(
            f"error: {path}:11:18: step convert: item {n - 1} ({n}): args.path: {n} is not of type 'string'"
            for n in range(1, 6)
        ),
        f"error: {path}:10:15: step convert: 3 more problems with other items",
    ]


def test_static_items_with_the_same_key_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = typed_workflow(
        tmp_path,
        """\
  convert:
    server: t
    tool: convert
    for_each: ${{ inputs.files }}
    key: ${{ item.name }}
    args: {path: "${{ item.path }}", out_dir: out}
""",
        inputs="  files: {type: array, default: [{name: a, path: x}, {name: a, path: y}]}\n",
    )
    assert check(path, capsys) == (
        2,
        [
            f"error: {path}:11:10: step convert: items 0 and 1 have the same key 'a'; "
            "give the step a `key` that tells them apart"
        ],
    )
