"""Links between the docs keep pointing somewhere: a link to a heading of a markdown page
(``benchmarks.md#device-pool``, or ``docs/benchmarks.md#unseen-tasks`` written in code and in
result notes) names a heading that page has, as GitHub turns headings into anchors. Pages are
rewritten and headings renamed; a link left behind otherwise breaks silently."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s#]*\.md)?#([^)\s]+)\)")
NAMED = re.compile(r"\b(docs/[\w.-]+\.md)#([\w-]+)")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, repeats numbered (``-1``, ``-2``); headings inside code blocks are not headings."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if fenced or not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _pages() -> list[Path]:
    notes = sorted((ROOT / "benchmarks/results").glob("notes-*.md"))
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *notes]


def test_markdown_links_to_headings_resolve() -> None:
    broken = []
    for page in _pages():
        for target, anchor in LINK.findall(page.read_text(encoding="utf-8")):
            linked = (page.parent / target) if target else page
            if linked.exists() and anchor not in anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert not broken, f"links to headings that do not exist: {broken}"


def test_pages_named_with_a_heading_in_code_and_notes_have_it() -> None:
    sources = [*_pages(), *(ROOT / "devicerl").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    sources += [*(ROOT / "benchmarks").rglob("*.py")]
    broken = []
    for source in sources:
        for page, anchor in NAMED.findall(source.read_text(encoding="utf-8")):
            if (ROOT / page).exists() and anchor not in anchors(ROOT / page):
                broken.append(f"{source.relative_to(ROOT)}: {page}#{anchor}")
    assert not broken, f"headings named that do not exist: {broken}"


def test_anchors_follow_githubs_rules(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Data, viewer, config\n## MiniWoB++ under AgentLab's protocol\n### pool_throughput.py\n"
        "## League\n### League\n```bash\n# not a heading\n```\n",
        encoding="utf-8",
    )
    assert anchors(page) == {
        "data-viewer-config",
        "miniwob-under-agentlabs-protocol",
        "pool_throughputpy",
        "league",
        "league-1",
    }
