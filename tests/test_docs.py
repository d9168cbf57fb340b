"""The README and docs/ hold together: every relative link resolves to a
file, every #anchor to a heading of its page, and the README stays short
with install, run and test in its first screen."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "bench").rglob("README.md")])

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
INDENTED_CODE = re.compile(r"(?:^(?: {4}|\t).*\n?)+", re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text without fenced or indented code blocks and code spans, where
    brackets are not links."""
    text = FENCE.sub("", text)
    text = INDENTED_CODE.sub("", text)
    return CODE_SPAN.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (no markup), lower case,
    punctuation but hyphens and underscores dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[`*]", "", text)
    text = re.sub(r"(?<!\w)_|_(?!\w)", "", text)  # _emphasis_, not snake_case
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor on ``page``; a repeated one gets -1, -2, ..."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text())):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text()))


def is_external(target: str) -> bool:
    return re.match(r"^[a-z][a-z0-9+.-]*:", target) is not None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in links(page):
        if is_external(target):
            continue
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_reachable_from_the_index():
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for target in links(index) if not is_external(target)}
    missing = [page.name for page in (ROOT / "docs").glob("*.md") if page != index and page.resolve() not in linked]
    assert not missing, f"docs/index.md does not link {missing}"


def test_the_readme_is_short_and_starts_with_install_run_and_test():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300
    first_screen = "\n".join(lines[:40])
    assert "pip install . && bpbc-screen examples/reads.fq.gz examples/adapters.fa" in first_screen
    assert "pip install '.[test]' && pytest -n auto" in first_screen


def test_the_link_checker_sees_what_it_checks(tmp_path):
    """The helpers above find links outside code, read anchors as GitHub
    writes them, and report a missing file or heading."""
    page = tmp_path / "page.md"
    page.write_text("# A title: the `lut3` kernel\n\n## Many GPUs or hosts: Dask\n\n## Two\n\n## Two\n\n"
                    "See [this](other.md#x), ![plot](p.png) and `[not](a-link.md)`.\n\n"
                    "```\n[not](either.md)\n```\n\n    [nor](this.md)\n")
    assert links(page) == ["other.md#x", "p.png"]
    assert anchors(page) == {"a-title-the-lut3-kernel", "many-gpus-or-hosts-dask", "two", "two-1"}
    assert slug("The paper's Table II") == "the-papers-table-ii"
    assert slug("AVX-512: the `lut3` kernel") == "avx-512-the-lut3-kernel"
    assert slug("`--threads` and bpbc_cache") == "--threads-and-bpbc_cache"
