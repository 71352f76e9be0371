"""``vigil local up`` reloads the team's code: a changed file is seen, and its modules are dropped
so the next invocation imports the new code (the runtime library stays loaded)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vigil_tools.local.reload import CodeWatcher


@pytest.fixture
def functions(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "teamjobs").mkdir()
    (tmp_path / "teamjobs" / "__init__.py").write_text("")
    (tmp_path / "teamjobs" / "report.py").write_text("ANSWER = 1\n")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in ("teamjobs", "teamjobs.report"):
        sys.modules.pop(name, None)


def test_an_edited_job_is_seen_and_imported_anew(functions: Path) -> None:
    watcher = CodeWatcher(functions)
    assert importlib.import_module("teamjobs.report").ANSWER == 1
    assert watcher.changed() == []

    source = functions / "teamjobs" / "report.py"
    source.write_text("ANSWER = 2\n")
    os.utime(source, (source.stat().st_atime, source.stat().st_mtime + 5))

    assert watcher.changed() == ["teamjobs/report.py"]
    watcher.forget_modules()
    assert importlib.import_module("teamjobs.report").ANSWER == 2
    assert watcher.changed() == []


def test_the_runtime_library_stays_loaded() -> None:
    import vigil.clock

    watcher = CodeWatcher(Path(vigil.clock.__file__).parent)  # only vigil's modules are under it
    watcher.forget_modules()

    assert sys.modules["vigil.clock"] is vigil.clock
