"""``vigil observers rebalance KIND``: the operator's request, kept as one marker on the hosts table.

Why there: the manager's healthy pass already scans the hosts table (O(hosts)), so it sees a
request without an extra call, while a marker on the registry's fleet counter would cost the
dedicated pass a GetItem. The marker's key (``REBALANCE_PREFIX + kind``) can never be a host id,
and :func:`is_rebalance_item` tells the manager's scan to read it as a request, not a host.

The API writes it (a later request for the same kind replaces an earlier one); the manager calls
:func:`vigil.observers.rollout.plan_rebalance` with ``max_moves``, carries the moves out as
hand-overs, then :meth:`RebalanceRequests.clear` deletes the marker it acted on (conditional on its
``requested_at_ms``, so a newer request is kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import epoch_ms, iso
from vigil.contract.hosts import HOSTS_KEY, REBALANCE_PREFIX
from vigil.dynamo import is_condition_failure, to_wire


@dataclass(frozen=True)
class RebalanceRequest:
    kind: str
    max_moves: int
    requested_by: str
    requested_at_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "max": self.max_moves,
            "requested_by": self.requested_by,
            "requested_at_ms": self.requested_at_ms,
        }


def is_rebalance_item(item: Mapping[str, Any]) -> bool:
    """True for a rebalance marker among the hosts table's items."""
    return str(item.get(HOSTS_KEY, "")).startswith(REBALANCE_PREFIX)


def request_from_item(item: Mapping[str, Any]) -> RebalanceRequest:
    return RebalanceRequest(
        kind=str(item["kind"]),
        max_moves=int(item["max_moves"]),
        requested_by=str(item.get("requested_by", "")),
        requested_at_ms=int(item["requested_at_ms"]),
    )


class RebalanceRequests:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def request(
        self, kind: str, max_moves: int, requested_by: str, now: datetime
    ) -> RebalanceRequest:
        """One PutItem: the newest request for a kind is the one that counts."""
        wanted = RebalanceRequest(kind, max_moves, requested_by, epoch_ms(now))
        item = {
            HOSTS_KEY: REBALANCE_PREFIX + kind,
            "kind": kind,
            "max_moves": max_moves,
            "requested_by": requested_by,
            "requested_at_ms": wanted.requested_at_ms,
            "requested_at": iso(now),
        }
        self._client.put_item(TableName=self._table, Item=to_wire(item))
        return wanted

    def clear(self, done: RebalanceRequest) -> bool:
        """Delete the marker acted on; False when a newer request has replaced it (kept)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=to_wire({HOSTS_KEY: REBALANCE_PREFIX + done.kind}),
                ConditionExpression="requested_at_ms = :acted",
                ExpressionAttributeValues=to_wire({":acted": done.requested_at_ms}),
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True
