"""``make bench`` writes each section between its own markers in the docs page that shows it
(the README held one block for all of them, so one rerun rewrote every table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.run import DOCS, SECTIONS, chosen_sections, markers, write


def test_every_section_has_its_place_in_exactly_one_page() -> None:
    pages = sorted(DOCS.rglob("*.md"))
    for section in SECTIONS:
        start, end = markers(section.slug)
        holders = [p.relative_to(DOCS) for p in pages if start in p.read_text()]
        assert len(holders) == 1, (section.slug, holders)
        text = (DOCS / holders[0]).read_text()
        assert text.count(start) == text.count(end) == 1, section.slug
        assert text.index(start) < text.index(end), section.slug


def test_a_rerun_replaces_its_own_section_and_leaves_the_others(tmp_path: Path) -> None:
    guide = tmp_path / "guides" / "deploying.md"
    guide.parent.mkdir()
    a_start, a_end = markers("a")
    b_start, b_end = markers("b")
    (tmp_path / "benchmarks.md").write_text(f"# B\n\n{b_start}\nold b\n{b_end}\n\nprose\n")
    guide.write_text(f"# D\n\n{a_start}\nold a\n{a_end}\n\nafter\n")

    assert write("a", "new a", docs=tmp_path) == guide

    assert guide.read_text() == f"# D\n\n{a_start}\nnew a\n{a_end}\n\nafter\n"
    assert (
        tmp_path / "benchmarks.md"
    ).read_text() == f"# B\n\n{b_start}\nold b\n{b_end}\n\nprose\n"


def test_a_section_without_a_place_is_added_to_the_benchmarks_page(tmp_path: Path) -> None:
    (tmp_path / "benchmarks.md").write_text("# B\n")
    start, end = markers("new")

    write("new", "table", docs=tmp_path)

    assert (tmp_path / "benchmarks.md").read_text() == f"# B\n\n{start}\ntable\n{end}\n"


def test_markers_in_two_pages_or_an_unknown_section_are_refused(tmp_path: Path) -> None:
    start, end = markers("a")
    for name in ("one.md", "two.md"):
        (tmp_path / name).write_text(f"{start}\n{end}\n")
    with pytest.raises(SystemExit, match="2 pages"):
        write("a", "x", docs=tmp_path)
    assert (tmp_path / "one.md").read_text() == f"{start}\n{end}\n"
    with pytest.raises(SystemExit, match="unknown section"):
        chosen_sections(["demo", "nope"])
