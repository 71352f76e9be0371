"""Observer kinds for runtime tests: ``run`` delegates to whatever the test installs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

behaviour: Callable[[Any], None] | None = None


def run(ctx: Any) -> None:
    assert behaviour is not None, "the test must install a behaviour"
    behaviour(ctx)


def crash(ctx: Any) -> None:
    ctx.checkpoint({"step": 1})
    raise RuntimeError("feed closed unexpectedly")
