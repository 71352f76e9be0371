"""The manager's writes to the hosts table: each one conditional, so a stale pass changes nothing.

Every reconciler write is conditioned on the item's ``version`` (which it bumps) and answers with
the item as it is now: ``ALL_NEW`` on success, ``ALL_OLD`` on a refusal (:class:`HostConflict`), so
the caller decides again without another read. The host's heartbeat never bumps ``version``, so
heartbeats never make the manager's writes fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import epoch_ms
from vigil.contract.hosts import DEAD_HOST_RETENTION_DAYS, HOST_EXPIRES, HOSTS_KEY, HostStatus
from vigil.dynamo import (
    Update,
    from_wire,
    is_condition_failure,
    old_item,
    paginate,
    to_wire,
    truncate,
)
from vigil.observers.hosts.model import ACCEPTING, Host, host_from_item
from vigil.observers.rebalance_requests import (
    RebalanceRequest,
    RebalanceRequests,
    is_rebalance_item,
    request_from_item,
)

DEAD = (HostStatus.LOST, HostStatus.STOPPED)
DEAD_HOST_RETENTION = timedelta(days=DEAD_HOST_RETENTION_DAYS)


def expired(item: Mapping[str, Any], now: datetime) -> bool:
    """A dead host's item past its retention (DynamoDB deletes it, possibly days later): the
    manager ignores it. Only LOST and STOPPED items carry an expiry."""
    expires = item.get(HOST_EXPIRES)
    return expires is not None and int(expires) <= int(now.timestamp())


class HostConflict(Exception):
    """The host item changed (or refused the change); ``current`` is it now (None: gone)."""

    def __init__(self, current: Host | None) -> None:
        super().__init__("host item changed concurrently")
        self.current = current


class HostStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    # Reads ---------------------------------------------------------------------------------------

    def scan(self, now: datetime | None = None) -> Iterator[Host]:
        """Every host, one Scan page per 1 MB: the healthy pass's O(hosts) read (with ``now``:
        without the dead hosts past their retention, see :func:`expired`)."""
        hosts, _ = self.scan_with_requests(now)
        yield from hosts

    def scan_with_requests(
        self, now: datetime | None = None
    ) -> tuple[list[Host], list[RebalanceRequest]]:
        """The hosts, and the operators' rebalance requests the same pages carry (their markers
        share the table so that the pass sees them without another call). With ``now``, dead
        hosts whose retention is over are skipped before they are even parsed."""
        hosts: list[Host] = []
        requests: list[RebalanceRequest] = []
        request = {"TableName": self._table, "ConsistentRead": True}
        for item in paginate(self._client.scan, request):
            if is_rebalance_item(item):
                requests.append(request_from_item(item))
            elif now is None or not expired(item, now):
                hosts.append(host_from_item(item))
        return hosts, requests

    def clear_request(self, done: RebalanceRequest) -> bool:
        """Delete a rebalance marker acted on (kept if a newer request replaced it)."""
        return RebalanceRequests(self._client, self._table).clear(done)

    def get(self, host_id: str) -> Host | None:
        response = self._client.get_item(
            TableName=self._table, Key=to_wire({HOSTS_KEY: host_id}), ConsistentRead=True
        )
        item = from_wire(response.get("Item"))
        return host_from_item(item) if item is not None else None

    # Writes --------------------------------------------------------------------------------------

    def create(
        self, host_id: str, kind: str, slots: int, task_definition: str, now: datetime
    ) -> Host:
        """The STARTING item, written before RunTask so a host is never started unrecorded."""
        item = {
            HOSTS_KEY: host_id,
            "kind": kind,
            "status": HostStatus.STARTING.value,
            "slots": slots,
            "assigned": {},
            "running": {},
            "handover": {},
            "task_definition": task_definition,
            "created_at_ms": epoch_ms(now),
            "start_attempts": 0,
            "version": 1,
        }
        self._client.put_item(
            TableName=self._table,
            Item=to_wire(item),
            ConditionExpression="attribute_not_exists(#k)",
            ExpressionAttributeNames={"#k": HOSTS_KEY},
        )
        return host_from_item(item)

    def record_task(self, host: Host, arn: str) -> Host:
        update = (
            Update()
            .set("task_arn", arn)
            .set("start_attempts", 0)
            .remove("status_reason", "retry_at_ms")
        )
        update.condition(update.one_of("status", *ACCEPTING))
        return self._write(host, update)

    def record_start_failure(self, host: Host, reason: str, retry_at: datetime) -> Host:
        update = Update().set_all(
            {
                "status_reason": truncate(reason),
                "start_attempts": host.start_attempts + 1,
                "retry_at_ms": epoch_ms(retry_at),
            }
        )
        return self._write(host, update)

    def assign(self, host: Host, name: str, generation: int) -> Host:
        """``assigned[name] = generation`` on an accepting host with a free slot (or already
        holding ``name``): the host runs it from its next heartbeat."""
        update = Update().set_in("assigned", name, generation)
        update.condition(update.one_of("status", *ACCEPTING))
        if name not in host.assigned:
            update.condition(update.size_lt("assigned", host.slots))
        return self._write(host, update)

    def unassign(self, host: Host, name: str, *, handover: bool = False) -> Host:
        """Remove ``name`` from ``assigned``: the host stops its child at its next heartbeat.

        ``handover`` keeps it in ``handover`` so a drain still moves it if no exit report comes;
        without, an earlier hand-over of it is forgotten too (it is off this host for good).
        """
        update = Update()
        if name in host.assigned:
            update.remove_in("assigned", name)
        if handover and name in host.assigned:
            update.set_in("handover", name, host.assigned[name])
        elif not handover and name in host.handover:
            update.remove_in("handover", name)
        return self._write(host, update)

    def forget_handovers(self, host: Host, names: Iterable[str]) -> Host:
        """Drop finished hand-overs (the next generation runs elsewhere): the map stays as small
        as the moves in flight, and the host may take those observers again one day."""
        update = Update()
        for name in sorted(set(names)):
            update.remove_in("handover", name)
        return self._write(host, update)

    def mark(
        self, host: Host, status: HostStatus, reason: str | None = None, *, now: datetime
    ) -> Host:
        """Set ``status``; RUNNING (a promotion) only over STARTING: the host's own DRAINING
        heartbeat bumps no ``version``, so the version alone would let RUNNING overwrite it.
        LOST and STOPPED also set the item's expiry (``HOST_EXPIRES``), in the same write."""
        update = Update().set("status", status.value)
        if reason:
            update.set("status_reason", truncate(reason))
        if status in DEAD:
            update.set(HOST_EXPIRES, int((now + DEAD_HOST_RETENTION).timestamp()))
        if status is HostStatus.RUNNING:
            update.condition(update.eq("status", HostStatus.STARTING.value))
        return self._write(host, update)

    def mark_evacuated(self, host: Host) -> Host:
        """Its loss or drain is finished: no pass looks at its observers again."""
        return self._write(host, Update().set("evacuated", True))

    def _write(self, host: Host, update: Update) -> Host:
        update.set("version", host.version + 1)
        update.condition(update.eq("version", host.version))
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=to_wire({HOSTS_KEY: host.host_id}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **update.request(),
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            old = old_item(error)
            raise HostConflict(host_from_item(old) if old else None) from error
        item = from_wire(response.get("Attributes"))
        assert item is not None
        return host_from_item(item)
