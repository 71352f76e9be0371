"""What ``pip install .`` puts in site-packages, and that the installed command runs from there.

The files are setuptools' own build of the packages (a wheel is that plus metadata; building the
wheel itself would need the ``wheel`` package or the network), with the egg-info, which holds the
entry points, written under tmp so the checkout stays clean.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"vigil": ROOT / "functions" / "vigil", "vigil_tools": ROOT / "vigil_tools"}
PROBE = """
import contextlib, importlib, io, json, sys
module, _, name = sys.argv[1].partition(":")
main = getattr(importlib.import_module(module), name)
answers = []
for argv in (["--help"], ["observers", "--help"], ["jobs", "--help"]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as done:
            code = done.code
    answers.append([code, out.getvalue()])
files = [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
print(json.dumps({"answers": answers, "files": files}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    setup = [sys.executable, "-c", "from setuptools import setup; setup()", "-q"]
    subprocess.run(
        [*setup, "egg_info", "--egg-base", str(out), "build_py", "--build-lib", str(out / "lib")],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return out


def run_installed(built: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Python with only the built packages (and the venv's dependencies), far from the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIGIL_PROJECT")}
    return subprocess.run(
        [sys.executable, "-P", *args],
        cwd=built,
        env={**env, "PYTHONPATH": str(built / "lib")},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_distribution_holds_the_runtime_and_the_tools_and_nothing_else(built: Path) -> None:
    lib = built / "lib"
    shipped = {str(p.relative_to(lib)) for p in lib.rglob("*") if p.is_file()}
    expected = {
        f"{package}/{p.relative_to(source)}"
        for package, source in SOURCES.items()
        for p in source.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert shipped == expected
    assert {p.name for p in lib.iterdir()} == {"vigil", "vigil_tools"}  # no infra, tests, app


def test_the_vigil_command_runs_from_the_installed_files_only(built: Path) -> None:
    (entry_points,) = built.glob("*.egg-info/entry_points.txt")
    assert "vigil = vigil_tools.cli:main" in entry_points.read_text()

    result = run_installed(built, "-c", PROBE, "vigil_tools.cli:main")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [code for code, _ in report["answers"]] == [0, 0, 0]
    assert all("usage: vigil" in text for _, text in report["answers"])
    ours = [f for f in report["files"] if "/vigil/" in f or "/vigil_tools/" in f]
    assert ours and all(f.startswith(str(built / "lib")) for f in ours)
    # The checkout's own files, not the virtualenv's (in a fresh clone .venv sits inside it; in a
    # git worktree .venv may be a link to another checkout's, its files named through the link).
    venv = (sys.prefix, str(Path(sys.prefix).resolve()))
    assert not [f for f in report["files"] if f.startswith(str(ROOT)) and not f.startswith(venv)]


def test_pytest_finds_the_vigil_stack_plugin_through_its_entry_point(built: Path) -> None:
    (entry_points,) = built.glob("*.egg-info/entry_points.txt")
    assert "[pytest11]\nvigil = vigil_tools.testing.plugin" in entry_points.read_text()


def test_the_demo_outside_a_project_says_how_to_point_at_one(built: Path) -> None:
    result = run_installed(built, "-m", "vigil_tools.demo")

    assert result.returncode == 2
    assert "no Vigil project at or above" in result.stderr
    assert "--project" in result.stderr and "VIGIL_PROJECT" in result.stderr
    assert "Traceback" not in result.stderr
