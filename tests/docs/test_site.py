"""The documentation site builds in strict mode: a broken link, a missing anchor, a page that is in
neither the navigation nor ``not_in_nav``, or a page the navigation names that does not exist fails
here, so it fails ``make test`` rather than a reader."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a process (mkdocs), ~3 CPU s: make test, not make test-fast
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert built.returncode == 0, built.stderr + built.stdout
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
