"""The YAML loader: positions, the dialect (no duplicate keys, YAML 1.2 booleans), and robustness."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.errors import WorkflowError
from runner.workflow.loader import load_inputs_file, load_workflow, parse_workflow, parse_yaml, validate

HERE = Path(__file__).parent
VALID = HERE / "workflows_valid" / "convert.yaml"
INVALID = sorted((HERE / "workflows_invalid").glob("*.yaml"))


def data_of(text: str) -> Any:
    return parse_yaml(text)[0]


class TestPositions:
    def test_keys_and_values(self) -> None:
        text = "version: 1\nsteps:\n  a:\n    args:\n      files: [x, {p: 1}]\n"
        _data, positions = parse_yaml(text, file="w.yaml")
        assert positions.keys[("steps", "a")] == (3, 3)
        assert positions.values[("steps", "a", "args", "files")] == (5, 14)
        assert positions.values[("steps", "a", "args", "files", 1, "p")] == (5, 22)
        assert positions.file == "w.yaml"

    def test_errors_point_at_the_value_or_the_key(self) -> None:
        text = "version: 1\nservers: {fs: {command: [x]}}\nsteps:\n  a:\n    server: fs\n    tool: 5\n    tols: x\n"
        with pytest.raises(WorkflowError) as info:
            parse_workflow(text, file="w.yaml")
        assert str(info.value) == (
            "w.yaml:6:11: steps.a.tool: expected a string, found an integer (5)\n"
            "  hint: quote the value to keep it a string\n"
            "w.yaml:7:5: steps.a.tols: unknown key 'tols'\n"
            "  hint: did you mean 'tool'?"
        )

    def test_an_error_inside_an_alias_points_at_the_alias(self) -> None:
        text = (
            "version: 1\nservers: {fs: {command: [x]}}\n"
            "x-args: &args {p: '${{ inputs.nope }}'}\n"
            "steps:\n  a: {server: fs, tool: t, args: *args}\n"
        )
        with pytest.raises(WorkflowError, match="unknown key 'x-args'"):
            validate(parse_workflow(text))
        text = text.replace("x-args: &args {p: '${{ inputs.nope }}'}\n", "").replace(
            "args: *args", "args: &a {p: '${{ inputs.nope }}'}"
        )
        text += "  b: {server: fs, tool: t, args: *a}\n"
        with pytest.raises(WorkflowError) as info:
            validate(parse_workflow(text, file="w.yaml"))
        assert "w.yaml:4:41: steps.a.args.p: unknown input 'nope'" in str(info.value)
        assert "w.yaml:5:34: steps.b.args.p: unknown input 'nope'" in str(info.value)  # the alias itself


class TestDialect:
    def test_duplicate_keys_are_refused_at_every_level(self) -> None:
        with pytest.raises(WorkflowError) as info:
            parse_yaml("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n", file="f")
        assert str(info.value) == (
            "f:4:3: b.c: duplicate key 'c' (first defined at line 3)\n"
            "  hint: YAML keeps only one of them; rename or remove one\n"
            "f:5:1: a: duplicate key 'a' (first defined at line 1)\n"
            "  hint: YAML keeps only one of them; rename or remove one"
        )

    def test_keys_stay_strings(self) -> None:
        assert data_of("on: 1\nyes: 2\n1: 3\nnull: 4\n2001-01-01: 5\n") == {
            "on": 1, "yes": 2, "1": 3, "null": 4, "2001-01-01": 5
        }  # fmt: skip

    def test_only_true_and_false_are_booleans(self) -> None:
        assert data_of("[true, False, TRUE, yes, no, on, off, y, n]") == [
            True, False, True, "yes", "no", "on", "off", "y", "n"
        ]  # fmt: skip

    def test_other_scalars(self) -> None:
        assert data_of("[1, -2, 0x10, 1.5, ~, null, '3', 12:30, 2024-01-02, 2024-01-02T10:00:00Z, =]") == [
            1, -2, 16, 1.5, None, None, "3", "12:30", "2024-01-02", "2024-01-02T10:00:00Z", "="
        ]  # fmt: skip

    @pytest.mark.parametrize("text", [".inf", "-.inf", "+.Inf", ".nan", ".NAN"])
    def test_numbers_json_cannot_carry_are_refused(self, text: str) -> None:
        with pytest.raises(WorkflowError) as caught:
            data_of(f"[1, {text}]")
        assert str(caught.value).startswith(f"<string>:1:5: [1]: {text!r} is not a JSON number")
        assert data_of(f"[1, '{text}']") == [1, text]

    @pytest.mark.parametrize("text", ["9" * 5000, "0x" + "f" * 5000, "-0" + "7" * 5000])
    def test_integers_too_long_to_write_are_refused_briefly(self, text: str) -> None:
        with pytest.raises(WorkflowError) as caught:
            data_of(f"v: {text}")
        message = str(caught.value)
        assert message.startswith(f"<string>:1:4: v: a number of {len(text):,} characters cannot be read")
        assert len(message) < 200  # not the digits again
        assert data_of("v: 0x" + "f" * 3000) == {"v": int("f" * 3000, 16)}  # long, and still writable

    def test_anchors_aliases_and_merge_keys(self) -> None:
        text = "base: &b {x: 1, y: 2}\nmerged: {<<: *b, y: 3}\nmany: {<<: [*b, {z: 4}], x: 0}\nsame: *b\n"
        data = data_of(text)
        assert data["merged"] == {"x": 1, "y": 3}
        assert data["many"] == {"x": 0, "y": 2, "z": 4}
        assert data["same"] == {"x": 1, "y": 2}

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("a: !!binary aGVsbG8=", "a: unsupported YAML tag tag:yaml.org,2002:binary"),
            ("a: !custom x", "a: unsupported YAML tag !custom"),
            ("a: !!set {x, y}", "a: unsupported YAML tag tag:yaml.org,2002:set"),
            ("? [a]\n: 1", "mapping keys must be strings, found a collection"),
            ("a: {<<: 5}", "a: a merge key (<<) takes a mapping or a list of mappings"),
            ("a: &x [*x]", "a[0]: a YAML alias refers to the node that contains it"),
            ("", "the file is empty"),
            (
                "a: 1\n---\nb: 2\n",
                "f:2:1: invalid YAML: expected a single document in the stream, but found another document",
            ),
        ],
    )
    def test_refused(self, text: str, message: str) -> None:
        with pytest.raises(WorkflowError, match=None) as info:
            parse_yaml(text, file="f")
        assert message in str(info.value)

    def test_an_alias_is_built_once(self) -> None:
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 4)]
        data = data_of("\n".join(lines))
        assert data["a3"][0] is data["a2"]

    def test_deep_nesting_is_an_error_not_a_crash(self) -> None:
        with pytest.raises(WorkflowError, match="nested deeper than the limit of 100 levels"):
            parse_yaml("[" * 5000 + "]" * 5000)

    def test_the_fast_and_the_pure_parser_agree(self) -> None:
        for path in [VALID, *INVALID]:
            text = path.read_text(encoding="utf-8")
            outcomes: list[Any] = []
            for fast in (True, False):
                try:
                    data, positions = parse_yaml(text, file="f", fast=fast)
                    outcomes.append((data, positions.keys, positions.values))
                except WorkflowError as exc:
                    outcomes.append(str(exc))
            assert outcomes[0] == outcomes[1], path.name


class TestFiles:
    def test_the_valid_example(self) -> None:
        loaded = load_workflow(VALID)
        assert loaded.file == str(VALID)
        plan = validate(loaded)
        assert plan.order == ("list_files", "convert", "report")
        assert plan.input_values == {"dir": "docs", "port": 8765, "token": None, "dry_run": False}
        assert plan.env_names == {"FS_KEY", "MD_TOKEN"}
        assert validate(VALID).file == str(VALID)

    def test_inputs_required_only_for_a_run(self) -> None:
        with pytest.raises(WorkflowError, match="missing required input 'token'") as info:
            validate(VALID, require_inputs=True)
        assert info.value.line == 26 and info.value.path == "inputs.token"
        plan = validate(VALID, require_inputs=True, input_pairs=["token=s3cret", "port=9000"])
        assert plan.input_values is not None and plan.input_values["port"] == 9000

    def test_inputs_file(self, tmp_path: Path) -> None:
        path = tmp_path / "inputs.yaml"
        path.write_text("token: abc\nport: 1\n", encoding="utf-8")
        values = load_inputs_file(path)
        assert validate(VALID, inputs_file=values, require_inputs=True).input_values == {
            "dir": "docs", "port": 1, "token": "abc", "dry_run": False
        }  # fmt: skip
        path.write_text("[1, 2]", encoding="utf-8")
        with pytest.raises(WorkflowError, match="an inputs file holds a mapping"):
            load_inputs_file(path)

    def test_unreadable_files(self, tmp_path: Path) -> None:
        with pytest.raises(WorkflowError, match="cannot read the workflow: No such file or directory"):
            load_workflow(tmp_path / "missing.yaml")
        bad = tmp_path / "latin1.yaml"
        bad.write_bytes(b"version: 1\nname: caf\xe9\n")
        with pytest.raises(WorkflowError, match=r":2:10: the workflow is not UTF-8 text: cannot decode 0xe9 \(at byte"):
            load_workflow(bad)
        bom = tmp_path / "bom.yaml"
        bom.write_bytes(b"\xef\xbb\xbfversion: 1\nsteps: {}\n")
        assert load_workflow(bom).workflow.version == 1


# ---------------------------------------------------------------------------------------------------
# Property tests: any input gives a plan or a WorkflowError, never another exception.

KEYS = [
    "version", "servers", "inputs", "steps", "outputs", "command", "url", "env", "headers", "server", "tool",
    "args", "needs", "if", "for_each", "key", "timeout", "type", "default", "a", "b", "fs", "<<",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["${{ steps.a.text }}", "${{ inputs.x }}", "${{ item }}", "${{ ", "90s", "fs", "a", "b"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5),
    max_leaves=25,
)


def must_be_workflow_error(text: str) -> None:
    try:
        validate(parse_workflow(text, file="fuzz.yaml"), input_pairs=["x=1"])
    except WorkflowError as exc:
        assert str(exc)


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES)
def test_random_documents(value: Any) -> None:
    must_be_workflow_error(yaml.safe_dump(value, allow_unicode=True))


@settings(deadline=None, max_examples=200)
@given(st.text(alphabet=st.sampled_from(list("ab:- \n\t[]{},&*!|>'\"#%@`?<=~.01$")), max_size=60))
def test_random_text(text: str) -> None:
    must_be_workflow_error(text)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


BASE = yaml.safe_load(VALID.read_text(encoding="utf-8"))
BASE_PATHS = _paths(BASE)[1:]


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(BASE_PATHS), st.sampled_from(["delete", "replace", "rename"]), VALUES),
                min_size=1, max_size=3))  # fmt: skip
def test_mutations_of_a_valid_workflow(mutations: list[tuple[tuple[Any, ...], str, Any]]) -> None:
    doc = copy.deepcopy(BASE)
    for path, action, value in mutations:
        parent: Any = doc
        try:
            for part in path[:-1]:
                parent = parent[part]
            last = path[-1]
            if action == "delete":
                del parent[last]
            elif action == "replace":
                parent[last] = value
            elif isinstance(parent, dict):
                parent[str(value)[:10]] = parent.pop(last)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    must_be_workflow_error(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))


EXAMPLES = {path.name: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(
    (HERE.parent / "workflows").glob("*.yaml"))}  # fmt: skip
EXAMPLE_PATHS = [(name, path) for name, doc in EXAMPLES.items() for path in _paths(doc)[1:]]


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(EXAMPLE_PATHS), st.sampled_from(["delete", "replace"]), VALUES),
                min_size=1, max_size=3))  # fmt: skip
def test_mutations_of_the_shipped_examples(mutations: list[tuple[tuple[str, tuple[Any, ...]], str, Any]]) -> None:
    """The example workflows in workflows/, mutated at random, give a WorkflowError or pass; never a traceback."""
    name = mutations[0][0][0]
    doc = copy.deepcopy(EXAMPLES[name])
    for (example, path), action, value in mutations:
        if example != name:
            continue
        parent: Any = doc
        try:
            for part in path[:-1]:
                parent = parent[part]
            if action == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    must_be_workflow_error(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
