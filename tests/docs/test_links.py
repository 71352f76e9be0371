"""Docs that lead somewhere, read from the markdown alone (no MkDocs build, no CDK: a fraction of a
second): every alarm's runbook entry links to a guide that explains its mechanism, every guide
links to the runbooks or the generated reference, and the anchors those links name exist.

The strict build (``tests/docs/test_site.py``) checks every link of the site; these say which
links must be there at all, so a new alarm or a new guide cannot arrive without them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from vigil.contract.alarms import RUNBOOKS, Alarm

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GUIDES = sorted((DOCS / "guides").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
ENTRY = re.compile(r"^## ", re.MULTILINE)
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def links(markdown: str) -> list[str]:
    """The targets of the Markdown links outside fenced code."""
    return LINK.findall(FENCE.sub("", markdown))


def entries() -> dict[str, str]:
    """Each runbook entry's text, by its heading (the alarm's identity)."""
    text = (ROOT / RUNBOOKS).read_text()
    return {
        part.split("\n", 1)[0].strip(): part.split("\n", 1)[1] for part in ENTRY.split(text)[1:]
    }


def anchors(page: Path) -> set[str]:
    """The ids the ``toc`` extension gives the page's headings (code spans read as their text)."""
    text = FENCE.sub("", page.read_text())
    return {slugify(title.replace("`", ""), "-") for title in HEADING.findall(text)}


def test_the_guides_are_read() -> None:
    """Guards the tests below: a glob that finds nothing would prove nothing."""
    assert {"jobs.md", "observers.md", "operating.md"} <= {guide.name for guide in GUIDES}


@pytest.mark.parametrize("alarm", list(Alarm), ids=str)
def test_every_alarm_has_a_runbook_entry_that_links_to_a_guide(alarm: Alarm) -> None:
    entry = entries().get(str(alarm))
    assert entry is not None, f"{RUNBOOKS} has no entry '## {alarm}'"
    to_guides = [target for target in links(entry) if target.startswith("guides/")]
    assert to_guides, f"{RUNBOOKS}#{alarm} links to no guide (docs/guides/) explaining it"
    for target in to_guides:
        page, _, anchor = target.partition("#")
        assert (DOCS / page).is_file(), target
        assert not anchor or anchor in anchors(DOCS / page), f"{alarm}: no heading for {target}"


@pytest.mark.parametrize("guide", GUIDES, ids=lambda path: path.name)
def test_every_guide_links_to_the_runbooks_or_the_reference(guide: Path) -> None:
    targets = links(guide.read_text())
    assert any(target.startswith(("../runbooks.md", "../reference/")) for target in targets), (
        f"docs/guides/{guide.name} links neither to the runbooks nor to the reference"
    )


@pytest.mark.parametrize("guide", GUIDES, ids=lambda path: path.name)
def test_a_guides_runbook_links_name_an_alarm(guide: Path) -> None:
    """``../runbooks.md#x``: ``x`` must be an alarm's identity (each is an entry's heading)."""
    named = [
        target.partition("#")[2]
        for target in links(guide.read_text())
        if target.startswith("../runbooks.md#")
    ]
    assert set(named) <= {str(alarm) for alarm in Alarm}, set(named) - set(map(str, Alarm))
