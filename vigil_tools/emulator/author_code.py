"""The team's code, imported anew wherever AWS would start a new process.

A Lambda container and an ECS task are new processes: the team's modules are imported afresh and
their module-level state (counters, caches, clients) starts again. The emulator runs them in this
process, so where AWS would start a new process (a new observer container, a new test, a changed
file under ``functions/``) it drops the team's modules from ``sys.modules`` and the next import
runs them again. The runtime library (``vigil``) stays loaded: the emulator's own objects are of
its classes (changing it needs a restart).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

RUNTIME_LIBRARY = "vigil"


def forget_modules(root: Path, *, also: Iterable[str] = ()) -> list[str]:
    """Drop every module imported from under ``root`` and the modules named in ``also`` (never the
    runtime library's); returns the names dropped."""
    prefix = str(root.resolve()) + os.sep
    named = set(also)
    dropped = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == RUNTIME_LIBRARY:
            continue
        source = getattr(module, "__file__", None) or ""
        if name in named or source.startswith(prefix):
            del sys.modules[name]
            dropped.append(name)
    return dropped
