"""The project's documentation as tests read it: the README and the pages under docs/, by page and by heading.

Tests that hold a page to the code find what they check through `section()`, so moving a section to another page
changes one name in the test, not how it reads the file."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"

_HEADING = re.compile(r"^(#{1,6}) +(.+?) *$", re.M)
_FENCE = re.compile(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[ \t]*$", re.M | re.S)
_SH = re.compile(r"^([ \t]*)```sh\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)


def page(name: str) -> Path:
    """`README.md`, or a page of docs/ by its file name (`spec.md`)."""
    return README if name == "README.md" else DOCS / name


def text(name: str) -> str:
    return page(name).read_text()


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def headings(markdown: str) -> list[tuple[int, str, int]]:
    """(level, title, offset) of every heading outside code blocks."""
    blanked = _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), markdown)
    return [(len(m.group(1)), m.group(2), m.start()) for m in _HEADING.finditer(blanked)]


def section(name: str, heading: str) -> str:
    """The text of the section titled `heading` in a page, up to the next heading of its level or above (its
    subsections included). A missing heading fails with the headings the page has."""
    markdown = text(name)
    found = headings(markdown)
    for i, (level, title, start) in enumerate(found):
        if title == heading:
            end = next((s for lv, _, s in found[i + 1:] if lv <= level), len(markdown))
            return markdown[start:end]
    raise AssertionError(f"{name} has no heading {heading!r}; it has {[t for _, t, _ in found]}")


def sh_blocks(markdown: str) -> list[str]:
    """The ```sh blocks of a text, dedented (a block inside a list item is indented)."""
    return [textwrap.dedent(body) for _, body in _SH.findall(markdown)]


def table_after(markdown: str, header: str) -> list[str]:
    """The rows of the Markdown table whose header line is `header` (stripped of indentation)."""
    lines = [line.strip() for line in markdown.splitlines()]
    start = lines.index(header)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
