"""Per-kind options the reconciler reads from ``PLACEMENTS_ENV`` (a JSON object per kind).

This module reads the rollout and capacity keys and the kind's placement (the API refuses to
rebalance a dedicated kind); the same objects carry the pooled keys ("slots_per_host",
"headroom"), which it leaves to their own reader, so one variable serves both and a kind's object
can grow without breaking this one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vigil.contract.hosts import (
    DEFAULT_MAX_UNAVAILABLE,
    PLACEMENT_CAPACITY,
    PLACEMENT_MAX_UNAVAILABLE,
    Capacity,
    Placement,
)

PLACEMENT = "placement"


@dataclass(frozen=True)
class KindOptions:
    max_unavailable: int = DEFAULT_MAX_UNAVAILABLE
    """Percent (1-100) of the kind's observers a rollout may hand over at once."""
    capacity: Capacity = Capacity.ON_DEMAND
    placement: Placement = Placement.DEDICATED


def parse_kind_options(raw: str) -> dict[str, KindOptions]:
    """``{"kind": {"max_unavailable": 10, "capacity": "spot", ...}, ...}``; ValueError says what."""
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object of kind -> options")
    return {str(kind): _options(str(kind), value) for kind, value in data.items()}


def _options(kind: str, value: Any) -> KindOptions:
    if not isinstance(value, dict):
        raise ValueError(f"{kind}: must be a JSON object")
    percent = value.get(PLACEMENT_MAX_UNAVAILABLE, DEFAULT_MAX_UNAVAILABLE)
    if isinstance(percent, bool) or not isinstance(percent, int) or not 1 <= percent <= 100:
        raise ValueError(f"{kind}.{PLACEMENT_MAX_UNAVAILABLE}: {percent!r} is not 1-100")
    capacity = value.get(PLACEMENT_CAPACITY, Capacity.ON_DEMAND.value)
    if capacity not in set(Capacity):
        raise ValueError(
            f"{kind}.{PLACEMENT_CAPACITY}: {capacity!r} is not one of {[c.value for c in Capacity]}"
        )
    placement = value.get(PLACEMENT, Placement.DEDICATED.value)
    if placement not in set(Placement):
        raise ValueError(
            f"{kind}.{PLACEMENT}: {placement!r} is not one of {[p.value for p in Placement]}"
        )
    return KindOptions(
        max_unavailable=percent, capacity=Capacity(capacity), placement=Placement(placement)
    )
