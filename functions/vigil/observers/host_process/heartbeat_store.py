"""The host's one write per heartbeat interval, on its own item in the hosts table.

One conditional UpdateItem carries the whole host's liveness (whatever its number of children):
it sets ``heartbeat_at_ms`` and ``running`` and, with ``ReturnValues=ALL_NEW``, answers with the
``assigned`` map the reconciler wrote, which is what the host must run. The condition (its own
``task_arn`` and a live status) is the host's fence: a host the reconciler declared LOST, stopped
or replaced by another task is refused, and learns it is a zombie.

A host shutting down (SIGTERM: scale-in, a Spot interruption, a deploy) says so in the same write:
``status`` DRAINING and its ``status_reason``, under the same condition (so a zombie cannot), so
the manager places its observers elsewhere as soon as each has checkpointed and exited, instead
of back on a host that will start nothing, until the task's STOPPED event. The write does not bump
``version``: the manager's versioned writes never fail because of a heartbeat, and the host says
DRAINING again at each heartbeat until it exits, so a stale manager write cannot undo it for long.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, epoch_ms, system_clock
from vigil.contract.hosts import (
    HOST_BEAT,
    HOST_LEASE_MS,
    HOSTS_KEY,
    LIVE_HOST_STATUSES,
    HostStatus,
    SlotState,
)
from vigil.dynamo import Update, from_wire, is_condition_failure, old_item, to_wire


class HostFenced(Exception):
    """The hosts table refused this host's heartbeat: it was declared LOST or STOPPED, or its item
    now names another task (or is gone). Every child must stop; the host exits FENCED."""

    def __init__(self, host_id: str, task_arn: str, seen: Mapping[str, Any] | None) -> None:
        if seen is None:
            why = "its item is gone"
        elif seen.get("task_arn") != task_arn:
            why = f"its item names task {seen.get('task_arn')!r}"
        else:
            why = f"its status is {seen.get('status')}"
        super().__init__(f"host {host_id!r} (task {task_arn}) was replaced: {why}")
        self.host_id = host_id
        self.seen = dict(seen) if seen is not None else None


@dataclass(frozen=True)
class Slot:
    """One child as the host reports it in ``running``."""

    generation: int
    state: SlotState

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "state": self.state.value}


@dataclass(frozen=True)
class Assignment:
    """What an accepted heartbeat answered."""

    assigned: dict[str, int]
    """Observer name -> the generation this host must run."""
    status: HostStatus


class HeartbeatStore:
    """The host side of the hosts table (the reconciler owns every other write)."""

    def __init__(
        self, client: Any, table: str, *, host_id: str, task_arn: str, clock: Clock = system_clock
    ) -> None:
        self._client = client
        self._table = table
        self.host_id = host_id
        self.task_arn = task_arn
        self._clock = clock

    def beat(
        self,
        running: Mapping[str, Slot],
        *,
        draining: str | None = None,
        lease_seconds: float | None = None,
    ) -> Assignment:
        """Record liveness and the children (and, with ``draining``, that the host is shutting
        down and why); raises HostFenced when refused. Each accepted beat adds 1 to ``beat``
        (liveness without clocks); ``lease_seconds``: how long after sending this beat the host's
        children may still work without another accepted one."""
        update = Update().set_all(
            {
                "heartbeat_at_ms": epoch_ms(self._clock()),
                "running": {name: slot.to_json() for name, slot in running.items()},
            }
        )
        update.add(HOST_BEAT, 1)
        if lease_seconds is not None:
            update.set(HOST_LEASE_MS, round(lease_seconds * 1000))
        if draining is not None:
            update.set_all({"status": HostStatus.DRAINING.value, "status_reason": draining})
        update.condition(
            update.eq("task_arn", self.task_arn),
            update.one_of("status", *(s.value for s in LIVE_HOST_STATUSES)),
        )
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key=to_wire({HOSTS_KEY: self.host_id}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **update.request(),
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            raise HostFenced(self.host_id, self.task_arn, old_item(error)) from error
        item = from_wire(answer["Attributes"]) or {}
        assigned = item.get("assigned") or {}
        return Assignment(
            assigned={str(name): int(generation) for name, generation in assigned.items()},
            status=HostStatus(item["status"]),
        )
