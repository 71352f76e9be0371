"""What the guards know of ``run.fenced`` and ``run.once`` without importing :mod:`vigil.effects`.

The guards (jobs, tasks) and the observer runtime treat a refused fenced write as their run being
superseded, not as a crash, and an effect found begun but not known finished as UNCERTAIN; they
must not load the effects for a run that never used them (if the module is not loaded, no write
went through it and no effect was journalled).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from vigil.clock import Clock, Sleeper, system_clock


def refused_write(error: BaseException) -> bool:
    effects = sys.modules.get("vigil.effects")
    return effects is not None and isinstance(error, effects.Fenced)


def uncertain_effect(error: BaseException) -> str | None:
    """The effect's name when ``error`` is ``run.once`` stopping the run on an effect whose
    intent was recorded by an earlier run without its completion; else None."""
    effects = sys.modules.get("vigil.effects")
    if effects is not None and isinstance(error, effects.Uncertain):
        return str(error.effect)
    return None


@dataclass(frozen=True)
class RunRecordSite:
    """Where a run's own record is, and how a write proves the run still holds it: what
    ``run.once`` needs to journal effects on that record (:mod:`vigil.effects.journal`)."""

    client: Any
    table: str
    key: Mapping[str, Any]
    token_attribute: str
    token: int
    running: str | None
    """The status value of a record whose run is under way; None where the token alone says it
    (an observer's generation: a stopping observer's generation still holds its record)."""
    label: str
    time_left_s: Callable[[], float]
    rolling: bool = False
    """The journal outlives any one run (an observer's, across its generations): when full, it
    forgets its oldest finished effects to make room, instead of refusing the new one."""
    clock: Clock = system_clock
    sleep: Sleeper = time.sleep


def once(
    record: RunRecordSite | None, effect: str, check: Callable[[], bool] | None
) -> AbstractContextManager[bool]:
    """``run.once`` of a job or task run (:mod:`vigil.effects.journal`): the journal is loaded
    on first use, like ``run.fenced``."""
    from vigil.effects import Journal

    if record is None:
        raise RuntimeError("this run has no record to journal effects on")
    return Journal(record).once(effect, check)
