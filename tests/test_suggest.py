"""``did you mean``: suggestions ranked by similarity, against the tool names of real MCP servers."""

from __future__ import annotations

import pytest

from runner.workflow.suggest import did_you_mean, similar
from runner.workflow.template import did_you_mean as template_did_you_mean

# The tools of the reference servers (modelcontextprotocol/servers), as their tools/list names them.
TIME = ["get_current_time", "convert_time"]
FILESYSTEM = [
    "read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file", "edit_file",
    "create_directory", "list_directory", "list_directory_with_sizes", "directory_tree", "move_file",
    "search_files", "get_file_info", "list_allowed_directories",
]  # fmt: skip
GIT = [
    "git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_commit", "git_add", "git_reset",
    "git_log", "git_create_branch", "git_checkout", "git_show", "git_branch",
]  # fmt: skip
MEMORY = [
    "create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
    "delete_relations", "read_graph", "search_nodes", "open_nodes",
]  # fmt: skip
ROOTS = ["inputs", "env", "steps", "item", "index"]


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        # the case: the words of the name matter more than shared letters
        ("get_time", TIME, ["get_current_time"]),
        ("current_time", TIME, ["get_current_time"]),
        ("getCurrentTime", TIME, ["get_current_time"]),
        ("convert", TIME, ["convert_time"]),
        # two names that fit as well: both, the better first
        ("time", TIME, ["convert_time", "get_current_time"]),
        ("reed_file", FILESYSTEM, ["read_file"]),
        ("readfile", FILESYSTEM, ["read_file"]),
        ("read_files", FILESYSTEM, ["read_file"]),
        ("read_txt_file", FILESYSTEM, ["read_text_file"]),
        ("read_multiple_file", FILESYSTEM, ["read_multiple_files"]),
        ("list_dir", FILESYSTEM, ["list_directory"]),
        ("list_directories", FILESYSTEM, ["list_directory"]),
        ("search", FILESYSTEM, ["search_files"]),
        ("write", FILESYSTEM, ["write_file"]),
        ("file_info", FILESYSTEM, ["get_file_info"]),
        ("tree", FILESYSTEM, ["directory_tree"]),
        ("make_directory", FILESYSTEM, ["create_directory"]),
        ("status", GIT, ["git_status"]),
        ("gitStatus", GIT, ["git_status"]),
        ("git_stat", GIT, ["git_status"]),
        ("diff", GIT, ["git_diff"]),
        ("git_diff_unstage", GIT, ["git_diff_unstaged"]),
        ("commit", GIT, ["git_commit"]),
        ("create_entity", MEMORY, ["create_entities"]),
        ("delete_entity", MEMORY, ["delete_entities"]),
        ("add_observation", MEMORY, ["add_observations"]),
        ("search_node", MEMORY, ["search_nodes"]),
        ("readGraph", MEMORY, ["read_graph"]),
        # nothing close: no suggestion rather than a wrong one
        ("list_files", FILESYSTEM, []),
        ("ls", FILESYSTEM, []),
        ("mkdir", FILESYSTEM, []),
        ("foo", TIME + FILESYSTEM + GIT + MEMORY, []),
        ("echo", TIME + FILESYSTEM + GIT + MEMORY, []),
        # template names, keys, functions: one-word typos as before
        ("imputs", ROOTS, ["inputs"]),
        ("stpes", ROOTS, ["steps"]),
        ("items", ROOTS, ["item"]),
        ("idx", ROOTS, ["index"]),
        ("lenght", ["length", "join", "sort", "max"], ["length"]),
        ("structure", ["result", "structured", "text", "json", "status"], ["structured"]),
        ("txt", ["result", "structured", "text", "json", "status"], ["text"]),
    ],
)
def test_similar_ranks_by_words_and_letters(word: str, choices: list[str], expected: list[str]) -> None:
    assert similar(word, choices) == expected


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("get_time", TIME, "did you mean 'get_current_time'?"),
        ("time", TIME, "did you mean 'convert_time' or 'get_current_time'?"),
        ("foo", TIME, None),
    ],
)
def test_did_you_mean_says_it_in_words(word: str, choices: list[str], expected: str | None) -> None:
    assert did_you_mean(word, choices) == expected


def test_at_most_three_suggestions_best_first() -> None:
    names = ["step_a", "step_b", "step_c", "step_d"]
    assert similar("step", names) == ["step_a", "step_b", "step_c"]
    assert did_you_mean("step", names) == "did you mean 'step_a', 'step_b' or 'step_c'?"
    assert similar("step", names, limit=1) == ["step_a"]


def test_choices_may_be_a_mapping_and_repeat() -> None:
    assert similar("get_time", dict.fromkeys(TIME + TIME)) == ["get_current_time"]


def test_templates_use_the_same_suggestions() -> None:
    assert template_did_you_mean is did_you_mean
