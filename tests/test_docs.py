"""The README stays a newcomer's and an adopter's few screens, and the reference it points to stays reachable:
every relative link in the README, docs/ and runbooks/ resolves (file and heading), every docs/ page is linked
from the README and links back to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import docs
from tests.conftest import REPO

MAX_README_LINES = 300
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")

ALL = [docs.README, *docs.pages(), *sorted((REPO / "runbooks").glob("*.md"))]


def _links(path: Path) -> list[str]:
    prose = _CODE.sub("", _FENCE.sub("", path.read_text()))
    return [target for target in _LINK.findall(prose) if not re.match(r"[a-z]+:", target)]


def _anchors(path: Path) -> set[str]:
    return {docs.slug(title) for _, title, _ in docs.headings(path.read_text())}


def _broken(path: Path) -> list[str]:
    broken = []
    for target in _links(path):
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading with that anchor in {resolved.name}")
    return broken


def test_the_readme_fits_on_a_few_screens():
    lines = docs.text("README.md").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move reference material into docs/"


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_to_a_file_and_a_heading(path):
    assert _broken(path) == []


def test_every_docs_page_is_linked_from_the_readme_and_links_back():
    linked = {(REPO / target.partition("#")[0]).resolve() for target in _links(docs.README)}
    pages = docs.pages()
    assert pages, "docs/ holds no page"
    orphans = [p.name for p in pages if p.resolve() not in linked]
    assert orphans == [], f"docs pages the README does not link: {orphans}"
    for p in pages:
        assert any((p.parent / t.partition("#")[0]).resolve() == docs.README.resolve() for t in _links(p)), \
            f"{p.name} does not link back to the README"


def test_the_helper_finds_sections_by_heading_and_refuses_a_missing_one():
    section = docs.section("README.md", "Adopting groundctl")
    assert section.startswith("## Adopting groundctl") and "\n## " not in section[3:]
    with pytest.raises(AssertionError, match="has no heading"):
        docs.section("README.md", "No such heading")


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-section) [gone](missing.md) [anchor](other.md#nope) "
                    "`[code](missing.md)` [web](https://example.com)\n")
    assert [b.split(":")[0] for b in _broken(page)] == ["missing.md", "other.md#nope"]
