"""Every relative link of README.md, docs/*.md, DESIGN.md and the bench notes reaches a file of
the repository, and a link to a heading (`page.md#heading`, `#heading`) reaches a heading of that
page, with the anchors GitHub makes from headings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs import examples

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def prose(text: str) -> str:
    """The page without its code (a `[x](y)` in a code block or span is not a link)."""
    return INLINE_CODE.sub("", FENCED.sub("", text))


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`;
    a repeated one gains `-1`, `-2`, ..."""
    seen: dict[str, int] = {}
    found = set()
    for title in HEADING.findall(FENCED.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no such heading")
    return broken


PAGES = examples.pages()
#: Pages whose links are checked too, though they hold no examples.
OTHERS = [examples.ROOT / "DESIGN.md", examples.ROOT / "bench" / "NOTES.md",
          *sorted((examples.ROOT / "bench" / "notes").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES + OTHERS, ids=[examples.page_id(p) for p in PAGES + OTHERS])
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Models in Cloud Storage (`gs://`)\n\n## Errors\n## Errors\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#models-in-cloud-storage-gs) [ok](other.md#errors-1) [ok](#top)\n"
                    "# Top\n[gone](missing.md) [bad](other.md#nothing) `[code](missing.md)`\n"
                    "[web](https://example.com/x.md)\n")
    assert broken_links(page) == ["missing.md: no such file", "other.md#nothing: no such heading"]


def test_the_readme_links_every_docs_page() -> None:
    readme = (examples.ROOT / "README.md").read_text()
    unlinked = [p.name for p in PAGES[1:] if f"(docs/{p.name})" not in readme]
    assert unlinked == [], "add them to README.md's Documentation table"
