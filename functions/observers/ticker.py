"""The example observer: counts ticks, logs each one, checkpoints the count and writes it to the
team's table through ``ctx.fenced``.

After a restart it continues from the last checkpoint, which makes restarts visible in the logs
(the count does not go back to 1). The count's item (``COUNTS``, keyed by the observer's name) is
written with the generation's fence: a replaced generation that wakes up late cannot write over
its successor's count (its write raises ``Fenced`` and the runtime stops it, as a refused
checkpoint does). Config: ``{"interval_seconds": 5}`` (optional).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vigil.observers.runtime import ObserverContext

DEFAULT_INTERVAL_SECONDS = 5.0
COUNTS = "TickerCounts"
"""The table app.py declares in the kind's ``writes=[...]`` (its alias there)."""


def run(ctx: ObserverContext) -> None:
    count = int((ctx.state or {}).get("count", 0))
    interval = float(ctx.config.get("interval_seconds", DEFAULT_INTERVAL_SECONDS))
    counts = ctx.fenced.table(COUNTS)
    ctx.logger.info("ticker starting", extra={"count": count, "interval_seconds": interval})
    while not ctx.stopping:
        count += 1
        ctx.logger.info("tick", extra={"count": count})
        ctx.checkpoint({"count": count})
        counts.put_item(
            Item={
                "observer": {"S": ctx.name},
                "count": {"N": str(count)},
                "generation": {"N": str(ctx.generation)},
            }
        )
        ctx.sleep(interval)
    ctx.logger.info("ticker stopping", extra={"count": count})
