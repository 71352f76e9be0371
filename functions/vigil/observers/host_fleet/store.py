"""The manager's writes to the hosts table: each one conditional, so a stale pass changes nothing.

Every reconciler write is conditioned on the item's ``version`` (which it bumps) and answers with
the item as it is now: ``ALL_NEW`` on success, ``ALL_OLD`` on a refusal (:class:`HostConflict`), so
the caller decides again without another read. The host's heartbeat never bumps ``version``, so
heartbeats never make the manager's writes fail.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Sleeper, epoch_ms
from vigil.contract.hosts import (
    DEAD_HOST_RETENTION_DAYS,
    HOST_EXPIRES,
    HOSTS_KEY,
    LIVE_HOST_ATTRIBUTE,
    LIVE_HOST_PARTITION,
    LIVE_HOSTS_INDEX,
    LIVE_INDEX_MARKER,
    REBALANCE_PREFIX,
    Capacity,
    HostStatus,
)
from vigil.contract.observers import HOST_REGISTRY_ATTRIBUTE
from vigil.dynamo import (
    Update,
    any_of,
    batch_get,
    from_wire,
    is_condition_failure,
    old_item,
    paginate,
    to_wire,
    truncate,
)
from vigil.observers.host_fleet.model import ACCEPTING, Host, host_from_item
from vigil.observers.rebalance_requests import (
    RebalanceRequest,
    RebalanceRequests,
    is_rebalance_item,
    request_from_item,
)

DEAD = (HostStatus.LOST, HostStatus.STOPPED)
DEAD_HOST_RETENTION = timedelta(days=DEAD_HOST_RETENTION_DAYS)
BATCH_GET_KEYS = 100


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
    def __init__(self, client: Any, table: str, sleep: Sleeper = time.sleep) -> None:
        self._client = client
        self._table = table
        self._sleep = sleep
        """Backoff between BatchGetItem rounds that left keys unprocessed (throttling)."""

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
        request = {"TableName": self._table, "ConsistentRead": True}
        return _hosts_and_requests(paginate(self._client.scan, request), now)

    def live(
        self, kinds: Iterable[str], now: datetime
    ) -> tuple[list[Host], list[RebalanceRequest]]:
        """The hosts the manager must look at (live, or dead and not yet evacuated: the sparse
        ``LIVE_HOSTS_INDEX``) and the rebalance requests of ``kinds``: one Query page of keys
        per ~8,000 hosts, then their items (consistent BatchGetItem, 100 a call; the markers'
        keys ride along). O(live hosts): a week of dead hosts costs nothing here.

        Hosts started before the index existed lack its attribute: while ``LIVE_INDEX_MARKER``
        is absent, the table is scanned once and they are given it (:meth:`_backfill`)."""
        request = {
            "TableName": self._table,
            "IndexName": LIVE_HOSTS_INDEX,
            "KeyConditionExpression": "#l = :l",
            "ExpressionAttributeNames": {"#l": LIVE_HOST_ATTRIBUTE},
            "ExpressionAttributeValues": to_wire({":l": LIVE_HOST_PARTITION}),
        }
        keys = [str(item[HOSTS_KEY]) for item in paginate(self._client.query, request)]
        keys += [LIVE_INDEX_MARKER, *(REBALANCE_PREFIX + kind for kind in sorted(set(kinds)))]
        items: list[dict[str, Any]] = []
        for start in range(0, len(keys), BATCH_GET_KEYS):
            chunk: list[Mapping[str, Any]] = [
                {HOSTS_KEY: key} for key in keys[start : start + BATCH_GET_KEYS]
            ]
            items += batch_get(
                self._client, self._table, chunk, None, sleep=self._sleep, consistent=True
            )
        if not any(item.get(HOSTS_KEY) == LIVE_INDEX_MARKER for item in items):
            return self._backfill(kinds, now)
        return _hosts_and_requests(items, now)

    def _backfill(
        self, kinds: Iterable[str], now: datetime
    ) -> tuple[list[Host], list[RebalanceRequest]]:
        """Once per table: a scan, the index attribute on every item the manager must look at
        that lacks it (one write each, conditioned on nothing else changing), then the marker."""
        kinds = set(kinds)
        request = {"TableName": self._table, "ConsistentRead": True}
        items = list(paginate(self._client.scan, request))
        hosts, requests = _hosts_and_requests(items, now)
        for item in items:
            if is_marker(item) or item.get(LIVE_HOST_ATTRIBUTE) is not None:
                continue
            host = host_from_item(item)
            if needs_manager(host):
                update = Update().set(LIVE_HOST_ATTRIBUTE, LIVE_HOST_PARTITION)
                update.condition(update.eq("version", host.version))
                try:
                    self._client.update_item(
                        TableName=self._table,
                        Key=to_wire({HOSTS_KEY: host.host_id}),
                        **update.request(),
                    )
                except ClientError as error:
                    if not is_condition_failure(error):
                        raise
                    return hosts, [r for r in requests if r.kind in kinds]  # next pass again
        self._client.put_item(
            TableName=self._table,
            Item=to_wire({HOSTS_KEY: LIVE_INDEX_MARKER, "backfilled_at_ms": epoch_ms(now)}),
        )
        return hosts, [r for r in requests if r.kind in kinds]

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
        self,
        host_id: str,
        kind: str,
        slots: int,
        task_definition: str,
        now: datetime,
        *,
        registry: str | None = None,
    ) -> Host:
        """The STARTING item, written before RunTask so a host is never started unrecorded
        (``registry``: how the registry its children write is keyed, ``HOST_REGISTRY_ATTRIBUTE``)."""
        item: dict[str, Any] = {
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
            LIVE_HOST_ATTRIBUTE: LIVE_HOST_PARTITION,
        }
        if registry is not None:
            item[HOST_REGISTRY_ATTRIBUTE] = registry
        self._client.put_item(
            TableName=self._table,
            Item=to_wire(item),
            ConditionExpression="attribute_not_exists(#k)",
            ExpressionAttributeNames={"#k": HOSTS_KEY},
        )
        return host_from_item(item)

    def record_task(self, host: Host, arn: str, now: datetime) -> Host:
        """The host's task, once RunTask started it: only onto an item without a task (or with
        this one), so a pass that lost the race to record never replaces the task recorded
        first (a :class:`HostConflict` whose ``current`` names the other task: stop its own).
        ``task_started_at_ms`` (kept from the first record) is where the start timeout counts
        from: a RunTask outage longer than the timeout must not doom the task that then starts."""
        update = (
            Update()
            .set("task_arn", arn)
            .set_default("task_started_at_ms", epoch_ms(now))
            .set("start_attempts", 0)
            .remove("status_reason", "retry_at_ms")
        )
        update.condition(update.one_of("status", *ACCEPTING))
        update.condition(any_of(update.absent("task_arn"), update.eq("task_arn", arn)))
        return self._write(host, update)

    def record_start_failure(
        self, host: Host, reason: str, retry_at: datetime, *, on_demand: bool = False
    ) -> Host:
        """``on_demand``: the failure was an unanswered on-demand fallback (it may have started
        the task), kept as ``capacity`` so that every retry asks on-demand (:attr:`Host.on_demand`)."""
        update = Update().set_all(
            {
                "status_reason": truncate(reason),
                "start_attempts": host.start_attempts + 1,
                "retry_at_ms": epoch_ms(retry_at),
            }
        )
        if on_demand or host.on_demand:
            update.set("capacity", Capacity.ON_DEMAND.value)
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

    def note_beat(self, host: Host, now: datetime) -> Host:
        """``beat_seen``: the reconciler saw this heartbeat value at ``now`` (its clock). Bumps
        no ``version`` (an observation, not a decision) and holds only while the value is the
        same: a host that beat meanwhile is alive (:class:`HostConflict`, nothing to do)."""
        assert host.heartbeat_at is not None
        beat = epoch_ms(host.heartbeat_at)
        update = Update().set("beat_seen", {"heartbeat_at_ms": beat, "at_ms": epoch_ms(now)})
        update.condition(update.eq("heartbeat_at_ms", beat))
        return self._update(host, update)

    def mark_evacuated(self, host: Host) -> Host:
        """Its loss or drain is finished: no pass looks at its observers again, nor reads it
        (it leaves ``LIVE_HOSTS_INDEX``; its item stays for its retention)."""
        return self._write(host, Update().set("evacuated", True).remove(LIVE_HOST_ATTRIBUTE))

    def _write(self, host: Host, update: Update) -> Host:
        update.set("version", host.version + 1)
        update.condition(update.eq("version", host.version))
        return self._update(host, update)

    def _update(self, host: Host, update: Update) -> Host:
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


def is_marker(item: Mapping[str, Any]) -> bool:
    """Not a host: an operator's request or the manager's own marker (host ids never start
    with ``#``)."""
    return str(item.get(HOSTS_KEY, "")).startswith("#")


def needs_manager(host: Host) -> bool:
    """Whether the passes must read the host: live, or dead with its end not finished."""
    return host.status not in DEAD or not host.evacuated


def _hosts_and_requests(
    items: Iterable[Mapping[str, Any]], now: datetime | None
) -> tuple[list[Host], list[RebalanceRequest]]:
    """Host items parsed (without dead ones past their retention) and rebalance markers."""
    hosts: list[Host] = []
    requests: list[RebalanceRequest] = []
    for item in items:
        if is_rebalance_item(item):
            requests.append(request_from_item(item))
        elif not is_marker(item) and (now is None or not expired(item, now)):
            hosts.append(host_from_item(item))
    return hosts, requests
