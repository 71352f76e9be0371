"""Synth-time check that a handler path ("package.module.function") exists under functions/.

Reads the module's source with ``ast`` instead of importing it: synth must not run job code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def validate_handler(handler: str, root: Path) -> str | None:
    """None if ``handler`` names a top-level function or assignment in a module under ``root``."""
    if not isinstance(handler, str) or not _PATH.match(handler):
        return f"{handler!r} must look like 'package.module.function'"
    module, _, attribute = handler.rpartition(".")
    relative = Path(*module.split("."))
    source = next(
        (p for p in (root / f"{relative}.py", root / relative / "__init__.py") if p.is_file()), None
    )
    if source is None:
        return f"{handler!r}: no module {module!r} under {root.name}/ (looked for {relative}.py)"
    tree = ast.parse(source.read_text(), filename=str(source))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    if attribute not in names:
        return f"{handler!r}: {source.relative_to(root.parent)} defines no {attribute!r}"
    return None
