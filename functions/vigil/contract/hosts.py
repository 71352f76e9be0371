"""Pooled observer hosts: the names the hosts table, the host process and the reconciler share.

A pooled kind's Fargate task is a *host*: one process that runs up to ``slots`` observers, each in
its own child process. The hosts table has one item per host task (key ``host_id``), small enough
that a scan of it is the healthy reconciler pass (O(hosts), not O(observers)).

Who writes what (each write is conditional, so a zombie or a stale reconciler changes nothing):

* The reconciler creates the item (STARTING) before RunTask, assigns observers to it (``assigned``:
  name -> generation), marks it DRAINING, LOST or STOPPED, and sets ``task_arn`` once ECS answers.
* The host writes only ``heartbeat_at_ms``, ``beat``, ``lease_ms`` and ``running`` (name ->
  {generation, state}), in ONE UpdateItem twice per heartbeat interval conditioned on its own
  ``task_arn`` and a live status, with ``ReturnValues=ALL_NEW``: the answer's ``assigned`` map is what it must run. A refused heartbeat
  means the host was replaced (a zombie): it stops every child and exits ``ExitCode.FENCED``.
  Once it is told to stop (SIGTERM), the same heartbeat also sets ``status`` DRAINING and
  ``status_reason`` (at once, then at each beat until it exits), under the same condition.
* When a child exits, the host reports it with one write on that observer's registry item
  (``HOST_EXIT``), conditioned on the observer's ``generation`` and ``host``; the reconciler treats it
  as it treats a dedicated task's STOPPED event.
"""

from __future__ import annotations

from enum import StrEnum


class Placement(StrEnum):
    """How a kind's observers get tasks."""

    DEDICATED = "dedicated"
    """One Fargate task per observer (the observer's own record is its liveness)."""
    POOLED = "pooled"
    """Up to ``slots_per_host`` observers per Fargate task (the host's item is their liveness)."""


class HostStatus(StrEnum):
    """A host's status (the hosts table's ``status``)."""

    STARTING = "STARTING"
    """Item written, RunTask asked for; no heartbeat yet."""
    RUNNING = "RUNNING"
    """Heartbeating; takes new observers while it has free slots."""
    DRAINING = "DRAINING"
    """Takes no new observers; its observers are handed over, then the task is stopped. Set by
    the manager (scale-in, rollout) or by the host itself when its task is told to stop."""
    LOST = "LOST"
    """Missed 3 heartbeats or its task stopped: its observers were moved; its heartbeat is refused."""
    STOPPED = "STOPPED"
    """Drained and its task stopped."""


LIVE_HOST_STATUSES = (HostStatus.STARTING, HostStatus.RUNNING, HostStatus.DRAINING)
"""Statuses whose heartbeat is accepted."""


class SlotState(StrEnum):
    """A child's ``state`` in the host's ``running`` map (an exited child is absent from it: its
    end is reported on the observer's item as ``HOST_EXIT``)."""

    RUNNING = "RUNNING"
    """Started for its assigned generation and not asked to stop."""
    STOPPING = "STOPPING"
    """Told to stop (unassigned, generation changed, host shutting down); not exited yet."""


HOST_ID_ENV = "VIGIL_HOST_ID"
"""Set by the reconciler's RunTask override on a host task (a dedicated task gets the observer's
name and generation instead)."""
HOSTS_TABLE_ENV = "VIGIL_HOSTS_TABLE"
"""The hosts table's name, in the container's and the reconciler's environment."""
HOST_SLOTS_ENV = "VIGIL_HOST_SLOTS"
"""K: how many observers the host runs at most (the kind's ``slots_per_host``)."""
HOST_STOP_TIMEOUT_ENV = "VIGIL_HOST_STOP_TIMEOUT_SECONDS"
"""Optional: how long the host waits for a child told to stop before it kills it (default 10 s;
keep it below the container's ECS stop timeout so a hand-over finishes before ECS's SIGKILL)."""
TASK_ARN_ENV = "VIGIL_TASK_ARN"
"""Optional: the host's own task ARN, for the local emulator and tests; on ECS the host reads it
from the task metadata endpoint (``ECS_CONTAINER_METADATA_URI_V4``)."""
PLACEMENTS_ENV = "VIGIL_OBSERVER_PLACEMENTS"
"""JSON: kind -> {"placement", "slots_per_host", "headroom", "max_unavailable", "capacity"}."""

HOSTS_KEY = "host_id"
HOST_ID_SEPARATOR = "_"
"""Between a host id's kind and its random part. Not a character a kind may have (``[a-z0-9-]``),
so the kind a host id starts with is exactly its kind: one kind's task role, whose hosts-table grant
matches ``host_id_pattern(kind)`` (``dynamodb:LeadingKeys``), reaches none of another kind's hosts,
even of a kind whose name its own begins with (``tick`` and ``ticker``, or ``tick-a``). Allowed in
ECS tags, ``startedBy`` and client tokens, where the host id also goes."""


def host_id(kind: str, unique: str) -> str:
    """A pooled host's id: its kind, the separator, then what makes it unique."""
    return f"{kind}{HOST_ID_SEPARATOR}{unique}"


def host_id_pattern(kind: str) -> str:
    """The IAM ``StringLike`` pattern every host id of ``kind`` matches and no other key does (the
    markers start with ``#``; another kind's ids start with that kind and the separator)."""
    return host_id(kind, "*")


HOST_EXPIRES = "expiration"
"""The hosts table's TTL attribute (epoch seconds, the name the other tables' TTL uses): set when a
host is marked LOST or STOPPED, ``DEAD_HOST_RETENTION_DAYS`` later, so a dead host stays
inspectable for a week and then DynamoDB deletes it (which may lag by days: the reconciler's scan
skips expired dead items meanwhile). A live host never has it."""
DEAD_HOST_RETENTION_DAYS = 7
LIVE_HOSTS_INDEX = "live-hosts-index"
"""The hosts table's sparse index of the hosts the manager has to look at: live ones (STARTING,
RUNNING, DRAINING) and dead ones whose loss or drain is not finished (not ``evacuated``). Only
those items carry ``LIVE_HOST_ATTRIBUTE``, and the index projects keys only, so a heartbeat never
writes it (a host's start and its end do). The passes query it and read those hosts (consistent
BatchGetItem): O(live hosts) whatever the deploy history, while a dead host's item stays its
week for inspection (``GET /hosts`` scans the table) without any pass reading it."""
LIVE_HOST_ATTRIBUTE = "live_host"
"""Partition of ``LIVE_HOSTS_INDEX``: ``LIVE_HOST_PARTITION`` on the hosts it lists, absent on the
others (set by the item's creation, removed by the write that marks it ``evacuated``)."""
LIVE_HOST_PARTITION = "live"
LIVE_INDEX_MARKER = "#live-hosts-index"
"""A hosts-table item written once the live index was backfilled (hosts started before the index
existed lack its attribute): while it is absent the resync scans the table once and backfills."""
HOST_BEAT = "beat"
"""Written by the host: a counter its every accepted heartbeat adds 1 to, so an operator sees a
host beating whatever its clock says. The manager judges liveness the same way, by the heartbeat
changing as seen on its own clock (``beat_seen``, :func:`vigil.observers.host_fleet.planning.host_dead`),
never by comparing the host's ``heartbeat_at_ms`` with its own clock."""
HOST_LEASE_MS = "lease_ms"
"""Written by the host at each heartbeat: its children are gone (fenced, then killed) at the latest
this long after it sent its last accepted heartbeat. A host whose ``beat`` has not changed for
longer than this, by any clock, runs nothing any more."""
HOST_ATTRIBUTES = (
    "kind",
    "status",
    "task_arn",
    "task_definition",
    "task_started_at_ms",
    "slots",
    "assigned",
    "running",
    "heartbeat_at_ms",
    HOST_BEAT,
    HOST_LEASE_MS,
    "created_at_ms",
    "status_reason",
    "handover",
    "start_attempts",
    "retry_at_ms",
    "capacity",
    "evacuated",
    "beat_seen",
    LIVE_HOST_ATTRIBUTE,
    HOST_EXPIRES,
    "version",
)
"""Every attribute of a host item besides its key; ``assigned`` and ``running`` are maps keyed by
observer name (``assigned[name]`` is a generation; ``running[name]`` is {"generation", "state"}).
``handover`` (reconciler only, the host ignores it) keeps name -> generation of the observers a
DRAINING host was told to give up, so they are moved even if their exit report never comes.
``task_started_at_ms`` (reconciler only): when RunTask's success was recorded, the start timeout's
origin. ``retry_at_ms`` (reconciler only): after a failed RunTask, when the next one may be tried (backoff).
``capacity`` (reconciler only): "on-demand" once a Spot kind's on-demand fallback went unanswered
(it may have started the task): every retry asks on-demand, never Spot (a second task).
``beat_seen`` (reconciler only): {"heartbeat_at_ms", "at_ms"}: a heartbeat value that looked off
(older or newer than one interval by the reconciler's clock) and when the reconciler first saw
it, on its own clock: liveness never compares the host's clock with the reconciler's beyond one
interval. ``evacuated`` (reconciler only) is set on a LOST or STOPPED host once its task is stopped and every
observer it had is moved: until then each pass finishes the job (a loss interrupted by an error)."""

OBSERVER_HOST = "host"
"""On an observer's registry item: the host id its current generation is placed on (absent for
dedicated observers)."""
OBSERVER_TASK_DEFINITION = "task_definition"
"""On an observer's registry item: the task definition ARN (with revision) its generation runs."""
HOST_EXIT = "host_exit"
"""On an observer's registry item, written by its host when the child exits: {"generation",
"exit_code" (an ``ExitCode``), "reason", "at_ms", ``HOST_EXIT_RAN_MS``}."""
HOST_EXIT_RAN_MS = "ran_ms"
"""In ``HOST_EXIT``: how long the child ran (from the host's start of it to its end), measured on
the host's monotonic clock. The reconciler's failure count reads this duration (a failure is quick
when the child ran less than ``healthy_after``), never ``at_ms`` (the host's wall clock) against its
own clock: minutes of skew between the two would make a healthy observer FAILED, or a crash loop
never FAILED. A report without it (a host from before it) is timed on the reconciler's clock."""


class Capacity(StrEnum):
    """Where a kind's tasks run (the kind's ``capacity``, in ``PLACEMENTS_ENV``)."""

    ON_DEMAND = "on-demand"
    """Fargate on-demand (``launchType=FARGATE``)."""
    SPOT = "spot"
    """Fargate Spot first (capacity provider ``FARGATE_SPOT``), on-demand when Spot has none."""


PLACEMENT_MAX_UNAVAILABLE = "max_unavailable"
"""``PLACEMENTS_ENV`` key: percent (1-100) of a kind's observers a rollout may hand over at once."""
PLACEMENT_CAPACITY = "capacity"
"""``PLACEMENTS_ENV`` key: a ``Capacity`` value."""
DEFAULT_MAX_UNAVAILABLE = 10
OBSERVER_CAPACITY = "capacity"
"""On an observer's registry item: the ``Capacity`` its current task got (Spot may fall back)."""
REBALANCE_PREFIX = "#rebalance#"
"""A hosts-table item keyed ``REBALANCE_PREFIX + kind`` is an operator's request to even that kind's
load (``vigil observers rebalance``): {"kind", "max_moves", "requested_by", "requested_at_ms"}.
The API writes it; the reconciler reads it in its hosts scan (no extra call), moves at most
``max_moves`` observers and deletes it. Host ids never start with ``#``."""
DEFAULT_REBALANCE_MOVES = 10
"""``vigil observers rebalance KIND`` without ``--max``: observers moved at most."""
MAX_REBALANCE_MOVES = 1000
"""The most one rebalance request may move (each move is a hand-over)."""
WAITING_INDEX = "pooled-waiting-index"
"""The registry's sparse index of pooled observers waiting for a placement (new, backing off, or
placed but not yet confirmed on the host): only those items carry ``WAITING_ATTRIBUTE``."""
WAITING_ATTRIBUTE = "pooled_waiting"
"""Partition of ``WAITING_INDEX``: the observer's kind, set with ``next_start_at_ms`` and removed
with it, on pooled observers only."""
WAITING_SORT = "next_start_at_ms"
"""Sort key of ``WAITING_INDEX``: when the reconciler may try (again)."""
