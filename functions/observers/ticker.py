"""The example observer: counts ticks, logs each one and checkpoints the count.

After a restart it continues from the last checkpoint, which makes restarts visible in the logs
(the count does not go back to 1). Config: ``{"interval_seconds": 5}`` (optional).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vigil.observers.runtime import ObserverContext

DEFAULT_INTERVAL_SECONDS = 5.0


def run(ctx: ObserverContext) -> None:
    count = int((ctx.state or {}).get("count", 0))
    interval = float(ctx.config.get("interval_seconds", DEFAULT_INTERVAL_SECONDS))
    ctx.logger.info("ticker starting", extra={"count": count, "interval_seconds": interval})
    while not ctx.stopping:
        count += 1
        ctx.logger.info("tick", extra={"count": count})
        ctx.checkpoint({"count": count})
        ctx.sleep(interval)
    ctx.logger.info("ticker stopping", extra={"count": count})
