"""Per-kind options from ``PLACEMENTS_ENV`` (one JSON object per kind, written by the construct).

One reader for every consumer: the reconciler (placement, headroom, rollouts, capacity), the API
(``GET /hosts``, rebalance) and the containers. A kind the variable does not name is dedicated,
on-demand, with the default rollout budget.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from vigil.contract.hosts import (
    DEFAULT_MAX_UNAVAILABLE,
    PLACEMENT_CAPACITY,
    PLACEMENT_MAX_UNAVAILABLE,
    Capacity,
    Placement,
)

PLACEMENT = "placement"
SLOTS_PER_HOST = "slots_per_host"
HEADROOM = "headroom"


@dataclass(frozen=True)
class KindOptions:
    placement: Placement = Placement.DEDICATED
    slots_per_host: int = 1
    """K: observers per host (pooled kinds)."""
    headroom: int = 0
    """Free slots kept ready for failovers (pooled kinds)."""
    max_unavailable: int = DEFAULT_MAX_UNAVAILABLE
    """Percent (1-100) of the kind's observers a rollout may hand over at once."""
    capacity: Capacity = Capacity.ON_DEMAND

    @property
    def pooled(self) -> bool:
        return self.placement is Placement.POOLED


KindOptionsMap = Mapping[str, KindOptions]


def parse_kind_options(raw: str) -> dict[str, KindOptions]:
    """``{"kind": {"placement": "pooled", "slots_per_host": 50, ...}, ...}``; ValueError says
    which kind and key is wrong."""
    try:
        data = json.loads(raw) if raw else {}
    except ValueError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object of kind -> options")
    return {str(kind): _options(str(kind), value) for kind, value in data.items()}


def pooled_kinds(options: KindOptionsMap) -> frozenset[str]:
    return frozenset(kind for kind, o in options.items() if o.pooled)


def _options(kind: str, value: Any) -> KindOptions:
    if not isinstance(value, dict):
        raise ValueError(f"{kind}: must be a JSON object")
    return KindOptions(
        placement=_choice(kind, value, PLACEMENT, Placement, Placement.DEDICATED),
        slots_per_host=_integer(kind, value, SLOTS_PER_HOST, 1, 1, None),
        headroom=_integer(kind, value, HEADROOM, 0, 0, None),
        max_unavailable=_integer(
            kind, value, PLACEMENT_MAX_UNAVAILABLE, DEFAULT_MAX_UNAVAILABLE, 1, 100
        ),
        capacity=_choice(kind, value, PLACEMENT_CAPACITY, Capacity, Capacity.ON_DEMAND),
    )


def _integer(
    kind: str, value: dict[str, Any], key: str, default: int, low: int, high: int | None
) -> int:
    number = value.get(key, default)
    too_high = high is not None and isinstance(number, int) and number > high
    if isinstance(number, bool) or not isinstance(number, int) or number < low or too_high:
        bounds = f"{low}-{high}" if high is not None else f">= {low}"
        raise ValueError(f"{kind}.{key}: {number!r} is not an integer {bounds}")
    return number


E = TypeVar("E", Placement, Capacity)


def _choice(kind: str, value: dict[str, Any], key: str, options: type[E], default: E) -> E:
    chosen = value.get(key, default.value)
    if chosen not in {o.value for o in options}:
        raise ValueError(f"{kind}.{key}: {chosen!r} is not one of {[o.value for o in options]}")
    return options(chosen)
