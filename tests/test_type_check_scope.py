"""mypy follows exactly the aws_cdk modules the type-checked code imports (pyproject.toml says why).

One missing from the list would be taken as Any, unchecked, without a word from mypy; one listed
but no longer imported costs the cold check its whole module for nothing.
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE_ROOTS = {"vigil": ROOT / "functions" / "vigil"}


def _mypy() -> dict[str, object]:
    config: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return config


def _checked_files() -> Iterator[Path]:
    for package in _mypy()["packages"]:  # type: ignore[attr-defined]
        yield from PACKAGE_ROOTS.get(package, ROOT / package).rglob("*.py")


def _cdk_modules(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "aws_cdk")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "aws_cdk":
                continue
            yield node.module
            for alias in node.names:
                if _is_module(f"{node.module}.{alias.name}"):
                    yield f"{node.module}.{alias.name}"


def _is_module(name: str) -> bool:
    """Found on disk, without importing aws_cdk (which starts jsii and loads all of it)."""
    spec = importlib.util.find_spec("aws_cdk")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent.joinpath(*name.split(".")[1:])
    return path.is_dir() or path.with_suffix(".py").is_file()


def imported_cdk_modules() -> set[str]:
    found: set[str] = set()
    for path in _checked_files():
        found.update(_cdk_modules(ast.parse(path.read_text(), str(path))))
    return found


def followed_cdk_modules() -> set[str]:
    overrides = _mypy()["overrides"]
    assert isinstance(overrides, list)
    return {
        module
        for override in overrides
        if override.get("follow_imports") == "normal"
        for module in override["module"]
        if module.split(".")[0] == "aws_cdk"
    }


def test_every_cdk_module_the_checked_code_imports_is_followed_and_no_other() -> None:
    assert imported_cdk_modules() == followed_cdk_modules()


def test_the_rest_of_the_cdk_is_skipped() -> None:
    skipped = [o for o in _mypy()["overrides"] if o.get("follow_imports") == "skip"]  # type: ignore[attr-defined]
    assert [o["module"] for o in skipped] == [["aws_cdk.*"]]
