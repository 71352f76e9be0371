"""Whether an error is a write ``run.fenced`` refused, asked without importing :mod:`vigil.effects`.

The guards (jobs, tasks) and the observer runtime treat such an error as their run being
superseded, not as a crash; they must not load the effects for a run that never used them (if
the module is not loaded, no write went through it).
"""

from __future__ import annotations

import sys


def refused_write(error: BaseException) -> bool:
    effects = sys.modules.get("vigil.effects")
    return effects is not None and isinstance(error, effects.Fenced)
