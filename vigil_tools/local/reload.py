"""Reload the team's code: poll the modification times under ``functions/``.

Lambda handlers are imported anew on their next invocation (their modules, and the team's modules
they imported, are dropped from ``sys.modules``); observer containers are new processes, so a
replacement or a new observer runs the new code. The runtime library (``vigil``) stays loaded:
changing it needs a restart.
"""

from __future__ import annotations

from pathlib import Path

from vigil_tools.emulator.author_code import forget_modules


class CodeWatcher:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._seen = self._scan()

    def _scan(self) -> dict[Path, float]:
        found: dict[Path, float] = {}
        for path in self.root.rglob("*.py"):
            try:
                found[path] = path.stat().st_mtime
            except OSError:
                continue
        return found

    def changed(self) -> list[str]:
        """The files added, changed or removed since the last look (relative to the root)."""
        now = self._scan()
        paths = {p for p in now.keys() | self._seen.keys() if now.get(p) != self._seen.get(p)}
        self._seen = now
        return sorted(str(p.relative_to(self.root)) for p in paths)

    def forget_modules(self) -> None:
        forget_modules(self.root)
