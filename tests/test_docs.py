"""The README and docs/ stay true: every relative link resolves (to a file, and to a heading when it names
one), and every YAML block marked ``<!-- validate -->`` on the line before its fence is a complete workflow
that ``mcp-run validate`` accepts, written as if in ``workflows/`` (so ``../peers/...`` resolves)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from runner.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
VALIDATE = re.compile(r"<!-- validate -->\n```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans hold no links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_there_are_docs() -> None:
    assert len(PAGES) >= 8
    assert len(FENCE.sub("", (ROOT / "README.md").read_text()).splitlines()) <= 300
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / unquote(path)).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert broken == []


def test_the_slugs_are_github_s() -> None:
    assert (
        slug("Stdio servers: where they start and what they get") == "stdio-servers-where-they-start-and-what-they-get"
    )
    assert slug("Conditions: `if` and status functions") == "conditions-if-and-status-functions"
    assert slug("Old HTTP+SSE servers") == "old-httpsse-servers"


BLOCKS = [(page, block) for page in PAGES for block in VALIDATE.findall(page.read_text(encoding="utf-8"))]


def test_there_are_workflows_to_validate() -> None:
    assert len(BLOCKS) >= 1


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[f"{p.name}-{i}" for i, (p, _) in enumerate(BLOCKS)])
def test_every_marked_workflow_validates(
    page: Path, block: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # as if in workflows/ of a checkout: stdio commands name ../peers/... relative to the workflow's folder
    (tmp_path / "peers").symlink_to(ROOT / "peers", target_is_directory=True)
    (tmp_path / "workflows").mkdir()
    workflow = tmp_path / "workflows" / "workflow.yaml"
    workflow.write_text(block, encoding="utf-8")
    code = main(["validate", str(workflow)])
    assert code == 0, capsys.readouterr().err


def test_the_tutorial_builds_the_shipped_workflow() -> None:
    """The tutorial's workflow is workflows/shout_copies.yaml, less the inputs' descriptions and the comments."""
    import yaml

    [block] = VALIDATE.findall((ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8"))
    shipped = yaml.safe_load((ROOT / "workflows" / "shout_copies.yaml").read_text(encoding="utf-8"))
    for spec in shipped["inputs"].values():
        spec.pop("description")
    assert yaml.safe_load(block) == shipped
