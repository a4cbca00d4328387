"""Every relative link in README.md and docs/*.md points at a file that exists, and at a heading there.

Anchors are checked as GitHub makes them from headings (lower case, punctuation dropped, spaces to
hyphens, ``-1``, ``-2`` for repeats). Links inside code are not links; web links are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`]*`")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
REFERENCE_USE = re.compile(r"\]\[([^\]]+)\]")
REFERENCE_DEFINITION = re.compile(r"^\[([^\]]+)\]:\s*(\S+)", re.MULTILINE)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _prose(page: Path) -> str:
    """The page without its code blocks and code spans."""
    return CODE_SPAN.sub("", FENCE.sub("", page.read_text()))


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _targets(page: Path) -> list[str]:
    prose = _prose(page)
    return [*INLINE_LINK.findall(prose), *(target for _, target in REFERENCE_DEFINITION.findall(prose))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _targets(page):
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no file {destination}")
        elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)} has broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_reference_link_is_defined(page: Path) -> None:
    prose = _prose(page)
    defined = {label.lower() for label, _ in REFERENCE_DEFINITION.findall(prose)}
    undefined = sorted({label for label in REFERENCE_USE.findall(prose) if label.lower() not in defined})
    assert not undefined, f"{page.relative_to(REPO)} uses undefined link references: {undefined}"


def test_the_readme_links_every_docs_page() -> None:
    readme = _targets(REPO / "README.md")
    docs = [page for page in PAGES if page.parent.name == "docs"]
    missing = [page.name for page in docs if f"docs/{page.name}" not in readme]
    assert not missing, f"README.md does not link these docs pages: {missing}"
