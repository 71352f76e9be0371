"""``make test`` runs every test; ``make test-fast`` the ones not marked slow: the two selections
cannot drift apart, since one is the marker's complement and the other selects nothing."""

from __future__ import annotations

import re
import shlex
import tomllib

from tests.conftest import ONE_WORKER_PACKAGES, SLOW_DIRECTORIES, TESTS, slow_reason, work_unit

ROOT = TESTS.parent
SELECTING = ("-m", "-k", "--deselect", "--ignore", "--ignore-glob", "--lf", "--last-failed", "-x")


def pytest_arguments(target: str) -> list[str]:
    """The arguments the Makefile target's recipe gives pytest."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, f"no recipe for {target}"
    (line,) = [line for line in recipe[1].splitlines() if "-m pytest" in line]
    command = line.split("-m pytest", 1)[1].split(";", 1)[0]  # to the end of pytest's command
    return shlex.split(command.removesuffix("\\"))


def test_make_test_selects_nothing_so_every_test_runs() -> None:
    arguments = pytest_arguments("test")
    assert not [a for a in arguments if a.split("=")[0] in SELECTING], arguments
    assert not [a for a in arguments if not a.startswith("-") and a.startswith("tests")]


def test_make_test_fast_selects_exactly_the_complement_of_slow() -> None:
    assert pytest_arguments("test-fast")[:2] == ["-m", "not slow"]
    rest = pytest_arguments("test-fast")[2:]
    assert not [a for a in rest if a.split("=")[0] in SELECTING or a.startswith("tests")], rest


def test_the_slow_marker_is_registered() -> None:
    pytest_config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    markers = pytest_config["ini_options"]["markers"]
    assert [m for m in markers if m.startswith("slow:")]


def test_a_test_is_slow_by_its_folder_its_fixtures_or_its_marker_and_otherwise_fast() -> None:
    unit = TESTS / "jobs" / "test_decisions.py"
    assert slow_reason(unit, ["clock", "monkeypatch"], marked=False) is None
    assert slow_reason(unit, ["clock"], marked=True) == "marked slow"
    assert slow_reason(unit, ["clock", "runs_table"], marked=False) == "uses runs_table"
    assert slow_reason(unit, ["clock"], False, ["MotoFleet"]) == "uses MotoFleet"
    for folder in SLOW_DIRECTORIES:
        assert slow_reason(TESTS / folder / "test_x.py", [], marked=False) == f"in tests/{folder}/"
    assert all((TESTS / folder).is_dir() for folder in SLOW_DIRECTORIES)


def test_a_package_sharing_a_fixture_is_one_work_unit_and_every_other_module_its_own() -> None:
    for package in ONE_WORKER_PACKAGES:
        assert (ROOT / package / "conftest.py").is_file(), package
        units = {work_unit(f"{package}{module}::test_x") for module in ("test_a.py", "test_b.py")}
        assert units == {package}
    assert work_unit("tests/jobs/test_decisions.py::test_x") == "tests/jobs/test_decisions.py"
    assert work_unit("tests/jobs/test_guard.py::Guard::test_x") == "tests/jobs/test_guard.py::Guard"
