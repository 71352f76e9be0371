"""Observer kinds for runtime tests: ``run`` delegates to whatever the test installs."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from typing import Any

behaviour: Callable[[Any], None] | None = None


def run(ctx: Any) -> None:
    assert behaviour is not None, "the test must install a behaviour"
    behaviour(ctx)


def crash(ctx: Any) -> None:
    ctx.checkpoint({"step": 1})
    raise RuntimeError("feed closed unexpectedly")


def misbehave(ctx: Any) -> None:
    """For real child processes (a test cannot install a behaviour there): ``config["mode"]``
    picks one; every mode first counts one checkpoint so the test sees it started."""
    ctx.checkpoint({"count": 1})
    mode = ctx.config.get("mode", "loop")
    if mode == "raise":
        raise RuntimeError("feed closed unexpectedly")
    if mode == "exit":
        os._exit(7)
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "hang":
        while True:  # ignores ctx.stopping: only SIGKILL ends it
            time.sleep(1)
    count = 1
    while not ctx.stopping:
        ctx.sleep(float(ctx.config.get("interval_seconds", 0.1)))
        count += 1
        ctx.checkpoint({"count": count})
