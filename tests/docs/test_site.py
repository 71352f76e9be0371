"""The documentation site builds in strict mode: a broken link, a missing anchor, a page that is in
neither the navigation nor ``not_in_nav``, or a page the navigation names that does not exist fails
here, so it fails ``make test`` rather than a reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # the whole site (mkdocs), ~3 CPU s: make test, not make test-fast
def test_the_site_builds_in_strict_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mkdocs build --strict`` through its own command line, in this process: a process of its
    own would import MkDocs and the code the reference pages are read from again (~3 CPU s more)."""
    from mkdocs.__main__ import cli as mkdocs_cli

    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    monkeypatch.chdir(ROOT)
    arguments = ["build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]

    # A warning in strict mode raises mkdocs' Abort (its messages are in the captured log).
    mkdocs_cli.main([*arguments, "--site-dir", str(tmp_path)], standalone_mode=False)

    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "guides" / "jobs" / "index.html").exists()


def test_every_link_of_the_readme_to_a_file_of_the_checkout_resolves() -> None:
    """The README is read on GitHub, not built by MkDocs, so strict mode does not see its links."""
    readme = (ROOT / "README.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme) if "://" not in t]

    assert targets, "the README links to the guides"
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_the_readme_stays_a_front_door() -> None:
    """Issue 18: at most about 200 lines; everything else lives in the guides."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
