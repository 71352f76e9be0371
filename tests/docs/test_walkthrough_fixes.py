"""What a walk-through of the guides found wrong stays fixed (each a text check, well under a
second): the kit's pages speak of ``vigil_tools.testing``, not an issue's name for it; the lists
of what ``run`` offers name ``run.tick``, ``run.once`` and ``run.fenced`` where the run has them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDES = ROOT / "docs" / "guides"


def test_no_page_calls_the_kit_the_issues_name_for_it() -> None:
    for path in [*GUIDES.glob("*.md"), ROOT / "vigil_tools" / "testing" / "__init__.py"]:
        assert "the issue's" not in path.read_text(), path


def test_the_lists_of_what_run_offers_are_whole() -> None:
    jobs, tasks = (GUIDES / "jobs.md").read_text(), (GUIDES / "tasks.md").read_text()
    for offered in ("run.tick", "run.fenced", "run.once("):
        assert offered in jobs, offered
    carries = tasks[tasks.index("`run` carries") :].split("\n\n", 1)[0]
    for offered in ("`fenced`", "`once(effect)`", "`progress(", "`remaining_time()`"):
        assert offered in carries, offered


def test_the_effects_guide_says_a_writer_is_named_by_its_construct_id() -> None:
    effects = (GUIDES / "effects.md").read_text()
    assert "alias declared" not in effects
    assert 'run.fenced.table("Sessions")  # the table\'s construct id' in effects
