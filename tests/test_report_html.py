"""``mcp-run report --html``: one self-contained page, parsed back with ``html.parser``: it names every failed and
in-doubt item, gives the commands that decide, shows inputs masked, and loads nothing from anywhere."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runner.cli import main
from runner.report.html import VALUES_SHOWN, html_page
from runner.report.model import build
from tests.report_run import RUN_ID, SECRET_INPUT, SETTLED, write_run
from tests.support import entries


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((tag, name, value or "") for name, value in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Page]:
    state_dir = tmp_path_factory.mktemp("state")
    write_run(state_dir)
    out = state_dir / "report.html"
    assert main(["report", RUN_ID, "--state-dir", str(state_dir), "--html", str(out)]) == 0
    source = out.read_text()
    parsed = Page()
    parsed.feed(source)
    parsed.close()
    return source, parsed


def test_the_page_names_every_failed_and_in_doubt_item(page: tuple[str, Page]) -> None:
    _source, parsed = page
    text = " ".join(parsed.text)
    for key in ("f1", "f2", "f4"):
        assert f"convert [{key}]" in text
    assert "In doubt (1)" in text and "f3" in text
    assert "--rerun-in-doubt" in text and "--skip-in-doubt" in text and "--accept-in-doubt" in text
    assert "disk full" in text and "cannot convert f2 <b>&</b>" in text  # a server's text, escaped
    assert SECRET_INPUT in text  # inputs as the journal holds them: masked


def test_the_page_loads_nothing(page: tuple[str, Page]) -> None:
    source, parsed = page
    assert not {"script", "link", "img", "iframe", "object", "embed", "image", "use"} & set(parsed.tags)
    assert not [a for a in parsed.attrs if a[1] in ("src", "href", "srcset", "xlink:href", "action", "data")]
    lowered = source.lower()
    assert "http://" not in lowered and "https://" not in lowered and "src=" not in lowered
    assert "url(" not in lowered and "@import" not in lowered
    assert {"svg", "style"} <= set(parsed.tags)  # the pictures and the style are inline


def test_the_page_has_its_pictures(page: tuple[str, Page]) -> None:
    source, _parsed = page
    assert source.count("<svg") == 3  # the DAG, the lanes, the throughput
    assert ">convert</text>" in source and "6 calls" in source
    assert 'class="wait"' in source and "1 retry wait, " in source  # the retried call's backoff, drawn


def test_report_html_of_a_workflow_at_hand_draws_its_edges(tmp_path: Path) -> None:
    from tests.report_run import WORKFLOW

    flow = tmp_path / "report.yaml"
    flow.write_text(WORKFLOW)
    write_run(tmp_path / ".mcp-run", workflow=flow.resolve())
    out = tmp_path / "page.html"
    assert main(["report", str(flow), "--html", str(out)]) == 0  # the newest run of the workflow
    source = out.read_text()
    assert source.count('class="edge"') == 3  # files -> convert, convert -> report, notes -> report
    assert "dependencies unknown" not in source


def test_with_the_workflow_at_hand_steps_are_in_its_order(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from tests.report_run import WORKFLOW

    flow = tmp_path / "report.yaml"
    flow.write_text(WORKFLOW)
    write_run(tmp_path / ".mcp-run", workflow=flow.resolve())
    out = tmp_path / "junit.xml"
    assert main(["report", str(flow), "--junit", str(out)]) == 0
    suites = [s.get("name") for s in ET.parse(out).getroot().iter("testsuite")]
    assert suites.index("files") < suites.index("convert") < suites.index("report")


def test_the_step_table_counts_the_reused_and_the_reconciled() -> None:
    source = html_page(build(entries(SETTLED)))
    header = source[source.index("<th>step</th>") :]
    header = header[: header.index("</tr>")]
    assert "<th>reused</th><th>reconciled</th>" in header
    [row] = [r for r in source.split("<tr>") if r.startswith("<td>convert</td>")]
    cells = [c.split("</td>")[0] for c in row.split("<td class=n>")[1:]]
    assert cells[:6] == ["4", "4", "0", "0", "1", "1"]  # calls, succeeded, failed, in doubt, reused, reconciled


def test_inputs_too_long_for_a_page_are_cut_saying_how_much_is_left_out() -> None:
    """An input list of 100,000 paths would be most of the page: the page shows the first VALUES_SHOWN
    characters, cut at a line end, and says how many more the journal holds."""
    events = [dict(e) for e in SETTLED]
    started = next(e for e in events if e["type"] == "run_started")
    started["inputs"] = {"paths": [f"/srv/docs/{i:06d}.md" for i in range(100_000)]}
    source = html_page(build(entries(events)))
    shown = source[source.index("<h2>Inputs</h2>") :]
    shown = html.unescape(shown[: shown.index("</pre>")])
    assert "/srv/docs/000000.md" in shown and "/srv/docs/099999.md" not in shown
    assert len(shown) < VALUES_SHOWN + 1_000
    whole = json.dumps(started["inputs"], indent=2)
    kept = shown[shown.index("<pre>") + 5 : shown.index("\n…")]
    assert whole.startswith(kept) and whole[len(kept)] == "\n"  # cut at a line end
    assert f"… {len(whole) - len(kept):,} more characters, left out of this page" in shown
    assert "run_started record" in shown
    small = html_page(build(entries(SETTLED)))
    assert "left out of this page" not in small
