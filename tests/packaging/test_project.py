"""How the tools that synthesize find the project, wherever they are run from."""

from __future__ import annotations

from pathlib import Path

import pytest

from vigil_tools.demo import main as demo
from vigil_tools.project import PROJECT_ENV, ProjectNotFound, find_project


def make_project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for marker in ("cdk.json", "app.py"):
        (folder / marker).write_text("")
    return folder


def test_the_nearest_project_at_or_above_the_working_directory(tmp_path: Path) -> None:
    root = make_project(tmp_path / "checkout")
    deep = root / "functions" / "jobs"
    deep.mkdir(parents=True)

    assert find_project(environ={}, cwd=deep).root == root.resolve()
    assert find_project(environ={}, cwd=root).functions == root.resolve() / "functions"


def test_an_explicit_path_comes_before_the_environment_and_the_environment_before_cwd(
    tmp_path: Path,
) -> None:
    here, named, given = (make_project(tmp_path / n) for n in ("here", "named", "given"))
    environ = {PROJECT_ENV: str(named)}

    assert find_project(given, environ=environ, cwd=here).root == given.resolve()
    assert find_project(environ=environ, cwd=here).root == named.resolve()


@pytest.mark.parametrize("origin", ["--project", f"${PROJECT_ENV}"])
def test_a_named_folder_that_is_not_a_project_is_an_error(tmp_path: Path, origin: str) -> None:
    explicit = str(tmp_path) if origin == "--project" else None
    environ = {PROJECT_ENV: str(tmp_path)} if explicit is None else {}

    with pytest.raises(ProjectNotFound, match=r"is not a Vigil project: .*cdk\.json and app\.py"):
        find_project(explicit, environ=environ, cwd=make_project(tmp_path / "elsewhere"))


def test_the_demo_refuses_a_folder_that_is_not_a_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--project", str(tmp_path)]) == 2
    assert f"--project {tmp_path.resolve()} is not a Vigil project" in capsys.readouterr().err
