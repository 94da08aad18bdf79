"""Every relative link and image in README.md and docs/*.md points to a file or folder of this
repository, and every ``#anchor`` to a heading of its target (GitHub's heading ids).

Reads markdown only: no model, no server, no QUANTDESK_HOME (``isolated_home`` is overridden
below, so the session's CPU probe does not run for these tests).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# the target of an inline link or image: [text](target "title") / ![alt](<target>)
INLINE_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML_TARGET = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']""")
HTML_ANCHOR = re.compile(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
# absolute paths of someone's machine: they mean nothing to a reader
MACHINE_PATH = re.compile(r"(?<![\w.~])(?:/home/|/Users/|/root/|/work/|[A-Z]:\\Users\\)")


def outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        yield number, line


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with code spans blanked out."""
    for number, line in outside_fences(text):
        yield number, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def github_slug(heading: str) -> str:
    """The id GitHub gives a heading: markup dropped, lower case, punctuation removed, spaces
    to hyphens (a repeat gets -1, -2: see ``anchors``)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a markdown file offers: its headings' ids and explicit <a name/id>."""
    text = path.read_text(encoding="utf-8")
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in outside_fences(text):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


@dataclass(frozen=True)
class Link:
    line: int
    target: str


def links(text: str) -> list[Link]:
    """Every link and image target in markdown prose (code is not read)."""
    found: list[Link] = []
    for number, line in prose_lines(text):
        for pattern in (INLINE_TARGET, REFERENCE_DEF, HTML_TARGET):
            found.extend(Link(number, target) for target in pattern.findall(line))
    return found


def broken_links(doc: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with each relative link of ``doc``, one line each ('' if nothing)."""
    problems: list[str] = []
    for link in links(doc.read_text(encoding="utf-8")):
        if SCHEME.match(link.target):
            continue  # http(s), mailto: not checked here (no network)
        where = f"{doc.relative_to(root)}:{link.line}: {link.target}"
        path_part, _, anchor = link.target.partition("#")
        target = (doc.parent / unquote(path_part)).resolve() if path_part else doc
        if path_part.startswith("/"):
            problems.append(f"{where}: an absolute path (write it relative to the page)")
            continue
        if not target.is_relative_to(root):
            problems.append(f"{where}: outside the repository")
            continue
        if not target.exists():
            problems.append(f"{where}: no such file or folder")
            continue
        if anchor and target.suffix == ".md" and anchor not in anchors(target):
            problems.append(f"{where}: no heading with id #{anchor} in {target.name}")
    return problems


@pytest.fixture(autouse=True)
def isolated_home() -> None:
    """Overrides tests/conftest.py's: these tests read files only (no CPU probe, no home)."""


def test_the_docs_are_found() -> None:
    names = {path.name for path in DOCS}
    assert {"README.md", "ARCHITECTURE.md", "DEVELOPING.md", "RPC.md", "STATS.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    assert broken_links(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_machine_paths(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    found = [
        f"{doc.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]
    assert found == []


def test_slugs_are_githubs() -> None:
    assert github_slug("The GPU check kit (issue 21)") == "the-gpu-check-kit-issue-21"
    assert github_slug("Fill-in-the-middle: llama.vscode, llama.vim") == (
        "fill-in-the-middle-llamavscode-llamavim"
    )
    assert github_slug("Context, `max_tokens` and the queue") == "context-max_tokens-and-the-queue"
    assert github_slug("Load-testing: quantdesk bench") == "load-testing-quantdesk-bench"
    assert github_slug("[Linked](x.md) *and* ünïcode") == "linked-and-ünïcode"


def test_the_checker_finds_what_is_broken(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text(
        "# Other\n\n## A part\n\n```\n# not a heading\n```\n"
    )
    (tmp_path / "pic.png").write_bytes(b"")
    page = tmp_path / "README.md"
    page.write_text(
        "# Page\n\n## Here\n\n"
        "[ok](docs/other.md#a-part) ![ok](pic.png) [ok](#here) [web](https://example.com)\n"
        "[gone](docs/missing.md) ![gone](nope.png) [bad anchor](docs/other.md#not-a-heading)\n"
        "[bad local](#nowhere) [out](../elsewhere.md)\n"
        "`[in code](not-checked.md)`\n\n```\n[in a block](not-checked.md)\n```\n"
    )
    problems = broken_links(page, root=tmp_path)
    assert [p.split(": ")[1] for p in problems] == [
        "docs/missing.md",
        "nope.png",
        "docs/other.md#not-a-heading",
        "#nowhere",
        "../elsewhere.md",
    ]
