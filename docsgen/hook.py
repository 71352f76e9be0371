"""MkDocs hook (``hooks:`` in mkdocs.yml): adds the generated reference pages to the build, and
fails it when the runbooks and the contract's alarms are out of step.

MkDocs loads this file by path, so it puts the checkout (``docsgen``, ``vigil_tools``, ``infra``)
and ``functions/`` (``vigil``) on the import path itself, as ``infra/__init__`` does for synth.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
for _path in (str(_ROOT / "functions"), str(_ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

from docsgen import runbooks  # noqa: E402
from docsgen.pages import PAGES  # noqa: E402


def on_files(files: Files, config: Any) -> Files:
    try:
        runbooks.check()
    except runbooks.RunbooksOutOfStep as problem:
        raise PluginError(str(problem)) from None
    for path, render in PAGES.items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(f"docs/{path} is generated at build time: delete the file")
        files.append(File.generated(config, path, content=render()))
    return files
