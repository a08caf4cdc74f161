"""A real batch over a server we did not write: @modelcontextprotocol/server-filesystem (pinned in
peers/package.json). It answers ``list_directory`` as text ("[FILE] a.txt" / "[DIR] sub", a line each); the
workflow cuts that text into a fan-out, reads each file, and writes a transformed copy with the same name
through a second fan-out over the first one's results (``item.item``, ``item.key``, ``item.text``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.support import ROOT, WORKFLOWS, journal_events, run_cli
from tests.integration.peers import NODE22, PEERS, missing_peer

pytestmark = pytest.mark.integration

FILESYSTEM = PEERS / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"

WORKFLOW = """\
version: 1
name: shouted copies of a folder's files
inputs:
  source: {type: string, default: notes}
  target: {type: string, default: shouted}
servers:
  fs:
    command: [NODE, SERVER, ROOT]
steps:
  list:
    server: fs
    tool: list_directory
    args: {path: "ROOT/${{ inputs.source }}"}
  read:
    server: fs
    tool: read_text_file
    for_each: '${{ lines(trim(steps.list.text))[?starts_with(@, ''[FILE] '')].extract(@, ''^\\[FILE\\] (.+)$'') }}'
    args: {path: "ROOT/${{ inputs.source }}/${{ item }}"}
  target:
    server: fs
    tool: create_directory
    args: {path: "ROOT/${{ inputs.target }}"}
  write:
    server: fs
    tool: write_file
    needs: [target]
    idempotent: true
    for_each: "${{ steps.read.results[?status == 'succeeded'] }}"
    key: "${{ item.key }}"
    args:
      path: "ROOT/${{ inputs.target }}/${{ item.item }}"
      content: "${{ upper(item.text) }}"
outputs:
  written: "${{ steps.write.results[*].key }}"
"""

FILES = {"a.txt": "hello world\n", "b.md": "# Second\nfile, with ünïcode\n", "with space.txt": "two words"}


def test_a_text_listing_feeds_two_chained_fan_outs(tmp_path: Path) -> None:
    if not FILESYSTEM.is_file():
        missing_peer("server-filesystem is not installed: run scripts/setup.sh")
    (tmp_path / "notes" / "sub").mkdir(parents=True)
    (tmp_path / "notes" / "sub" / "nested.txt").write_text("not listed: a folder is skipped\n")
    for name, text in FILES.items():
        (tmp_path / "notes" / name).write_text(text)
    node = str(NODE22) if NODE22.exists() else "node"
    text = WORKFLOW.replace("NODE", json.dumps(node)).replace("SERVER", json.dumps(str(FILESYSTEM)))
    workflow = tmp_path / "shout.yaml"
    workflow.write_text(text.replace("ROOT", str(tmp_path)))

    done = run_cli(tmp_path, str(workflow), "--state-dir", "state", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["outputs"]["written"] == ["a.txt", "b.md", "with space.txt"]
    assert {name: (tmp_path / "shouted" / name).read_text() for name in FILES} == {
        name: text.upper() for name, text in FILES.items()
    }
    assert sorted(p.name for p in (tmp_path / "shouted").iterdir()) == sorted(FILES)
    assert {s: (v["total"], v["succeeded"]) for s, v in summary["steps"].items()} == {
        "list": (1, 1),
        "read": (3, 3),
        "target": (1, 1),
        "write": (3, 3),
    }
    writes = [e["item"] for e in journal_events(tmp_path) if e["type"] == "item_dispatched" and e["step"] == "write"]
    assert sorted(writes) == sorted(FILES)  # keyed by the file names, readable in the journal


def test_the_example_runs_from_anywhere(tmp_path: Path) -> None:
    """workflows/shout_copies.yaml as shipped (its server's program is relative to the file), in a copy of
    the repository's layout, run from another folder."""
    if not FILESYSTEM.is_file():
        missing_peer("server-filesystem is not installed: run scripts/setup.sh")
    (tmp_path / "peers").symlink_to(ROOT / "peers")
    shutil.copytree(WORKFLOWS / "docs", tmp_path / "workflows" / "docs")
    shutil.copy(WORKFLOWS / "shout_copies.yaml", tmp_path / "workflows")
    (tmp_path / "elsewhere").mkdir()
    done = run_cli(tmp_path / "elsewhere", "../workflows/shout_copies.yaml", "--json")
    assert done.returncode == 0, done.stderr
    docs = sorted(p.name for p in (WORKFLOWS / "docs").iterdir() if p.is_file())
    assert json.loads(done.stdout)["outputs"]["written"] == docs
    for name in docs:
        copy = tmp_path / "workflows" / "build" / "shouted" / name
        assert copy.read_text() == (WORKFLOWS / "docs" / name).read_text().upper()
