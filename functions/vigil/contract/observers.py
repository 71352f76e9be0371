"""The observers' shared names: statuses, the fleet index, the container's exit codes."""

from __future__ import annotations

from enum import IntEnum, StrEnum

from vigil.contract.hosts import (
    HOST_EXIT,
    OBSERVER_CAPACITY,
    OBSERVER_HOST,
    OBSERVER_TASK_DEFINITION,
    WAITING_ATTRIBUTE,
)
from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE


class Status(StrEnum):
    """An observer's status (the registry's ``status``; the stream filters wake on some)."""

    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    FAILED = "FAILED"


class Desired(StrEnum):
    """What the operator asked for (the registry's ``desired``)."""

    RUNNING = "RUNNING"
    STOPPED = "STOPPED"


class ExitCode(IntEnum):
    """The observer container's exit codes: the runtime exits with them, the reconciler reads them
    from ECS to tell a crash from a stop."""

    CLEAN = 0
    """Stopped because asked to (SIGTERM or the registry), or the function returned."""
    CRASH = 1
    """The observer's own code raised."""
    BAD_CONFIGURATION = 2
    """Environment, kind or registry record unusable: restarting will not help."""
    FENCED = 3
    """This generation was replaced (or lost the registry): another container owns the observer."""
    UNCERTAIN = 4
    """``ctx.once`` found an effect an earlier generation began and never recorded done, and no
    ``check``: restarting would meet it again, so the reconciler marks the observer FAILED and a
    person settles the effect (``vigil observers settle``)."""


STATUS_REASON = "last_start_error"
"""On an observer's registry item: why it is not running yet (RunTask failed, no host took it),
written by the reconciler with the time it tries again and removed once it starts. The API and
``vigil observers list``/``get`` show it as ``status_reason``."""
UNCERTAIN_REASON = "uncertain_reason"
"""On an observer's registry item, beside ``uncertain_effect``: why ``ctx.once`` stopped it
UNCERTAIN (the effect's intent, by which generation, when), until ``vigil observers settle``."""

FLEET_INDEX = "fleet-index"
"""The registry's sparse index over the observers a resync decides: every one but the STOPPED
(partition ``FLEET_ATTRIBUTE``, sort ``name``). Its items carry the heartbeat, so a pass decides
without reading items; the STOPPED ones are left out so a pass costs the same whatever number of
stopped records the account keeps (they are in ``STOPPED_INDEX``)."""
FLEET_ATTRIBUTE = "fleet"
FLEET_PARTITION = "observers"
"""The value of ``FLEET_ATTRIBUTE`` (or ``STOPPED_ATTRIBUTE``) on an observer's item."""
STOPPED_INDEX = "stopped-index"
"""The registry's sparse index over the STOPPED observers (partition ``STOPPED_ATTRIBUTE``, sort
``name``), for what still lists them (``vigil observers list``, ``GET /observers``) and counts them
(FleetStopped, on a sweep minute). It projects only ``status``, which does not change while an
observer is STOPPED: heartbeats and other writes to the fleet's live records never write it."""
STOPPED_ATTRIBUTE = "stopped_fleet"
STOPPED_INDEX_PROJECTION = ("status",)


def status_fields(status: Status) -> tuple[dict[str, str], tuple[str, ...]]:
    """(attributes to set, attributes to remove) for a write that makes an observer's status
    ``status``: the status itself and its index membership, in the same write, so a record is in
    exactly one of ``FLEET_INDEX`` (not STOPPED) and ``STOPPED_INDEX`` (STOPPED). Every writer of
    a status goes through here (a test walks each one)."""
    if status is Status.STOPPED:
        return {"status": status.value, STOPPED_ATTRIBUTE: FLEET_PARTITION}, (FLEET_ATTRIBUTE,)
    return {"status": status.value, FLEET_ATTRIBUTE: FLEET_PARTITION}, (STOPPED_ATTRIBUTE,)


FLEET_INDEX_ATTRIBUTES = (
    "kind",
    "desired",
    "status",
    "generation",
    "task_arn",
    "restarts",
    "consecutive_failures",
    "heartbeat_at",
    "heartbeat_at_ms",
    "created_at",
    "updated_at",
    "version",
    "last_exit",
    "next_start_at",
    "next_start_at_ms",
    "failure_reason",
    "restart_generation",
)
"""An observer's status fields, never config or checkpoint: the registry lists them and the fleet
index projects them, so a pass over the whole fleet reads small items."""
LEGACY_ATTRIBUTE = "legacy_registry"
"""On an observer copied from a name-keyed registry: its current generation's container still
writes that table (it was started before the migration). The reconciler replays those writes here
and, when it starts the next generation, carries the old record's checkpoint and journal over and
fences the old record in the same transaction; the next generation has no mark."""
LEGACY_VERSION = "legacy_version"
"""Beside ``LEGACY_ATTRIBUTE``: the old record's version as last copied or replayed here (a take-over
carries over what the old container wrote after it)."""
TRACKING_ATTRIBUTES = (
    "task_version",
    "task_status",
    "started_at_ms",
    "start_attempts",
    OBSERVER_TASK_DEFINITION,
    OBSERVER_CAPACITY,
    LEGACY_ATTRIBUTE,
    LEGACY_VERSION,
)
"""The reconciler's own fields on each item (the task definition and capacity its current task was
started with are projected so a rollout pass finds outdated observers without reading items)."""
FLEET_INDEX_PROJECTION = (*FLEET_INDEX_ATTRIBUTES, *TRACKING_ATTRIBUTES)
"""The non-key attributes the fleet index projects (INCLUDE): a resync decides without reading
items."""


REGISTRY_TABLE_ENV = "VIGIL_REGISTRY_TABLE"
"""The registry (keyed by kind), in every function and container environment that reads it."""
LEGACY_REGISTRY_TABLE_ENV = "VIGIL_LEGACY_REGISTRY_TABLE"
"""The name-keyed registry of an earlier deployment, while it is being migrated (the reconciler
copies its observers and follows their running generations; the API waits for the copy):
``ObserverFleet`` sets it under context ``legacyRegistry=true`` only."""
NAME_KEYED_TABLE_ENV = "VIGIL_OBSERVERS_TABLE"
"""Where a deployment from before the registry was keyed by kind names its (name-keyed) registry:
code that finds it instead of ``REGISTRY_TABLE_ENV`` works on that table as that deployment did
(a function whose new code meets its old environment for a moment of a deploy; the containers an
old task definition runs)."""

REGISTRY_PARTITION = "kind"
"""The registry's partition key: an observer's kind, so ``dynamodb:LeadingKeys`` keeps a kind's
task role to its own observers (reads and writes alike)."""
REGISTRY_SORT = "name"
"""The registry's sort key: an observer's name (unique across kinds: ``NAMES_PARTITION``)."""
REGISTRY_KEY = REGISTRY_SORT
"""The name-keyed registry's only key (deployments from before the registry was keyed by kind)."""
NAMES_PARTITION = "#names"
"""The partition of the registry holding one small item per observer name (sort key the name,
``NAMED_KIND`` its kind), written in the create's transaction: names stay unique across kinds,
and a request that names only an observer (the API, an ECS event) finds its kind. ``#`` is in no
kind's name, so no kind's role reaches it."""
NAMED_KIND = "observer_kind"
"""On a ``NAMES_PARTITION`` item: the kind of the observer of that name."""
FLEET_COUNTER_KEY = "#fleet"
"""The partition (and sort key) of the fleet's ``active`` counter."""
RESYNC_LEASE = "#resync"
"""The partition (and sort key) of the resync pass's lease."""
MIGRATION_KEY = "#migration"
"""The partition (and sort key) of the migration's progress (``vigil observers migrate``)."""
HOST_REGISTRY_ATTRIBUTE = "registry"
"""On a host item the reconciler created: ``REGISTRY_PARTITION``, its children write the registry
keyed by kind. A live host without it was started before the migration (its children write the
name-keyed registry): it takes no new observer and counts as outdated, so a rollout drains it."""
CONTAINER_WRITES = (
    "heartbeat_at",
    "heartbeat_at_ms",
    "status",
    FLEET_ATTRIBUTE,
    STOPPED_ATTRIBUTE,
    "updated_at",
    "version",
    "checkpoint",
    "checkpoint_at",
    "last_exit",
    HOST_EXIT,
    JOURNAL_ATTRIBUTE,
    UNCERTAIN_EFFECT_ATTRIBUTE,
    UNCERTAIN_REASON,
)
"""What a container (a dedicated task, or a host and its children) sets or removes on an
observer's item (``vigil.observers.registry.fenced``): its claim (status RUNNING, with its index
membership), heartbeats, checkpoints, its exit report (status STOPPED when asked to stop) and a
host's report of a child's exit, and ``ctx.once``'s journal (an UNCERTAIN effect named on the
record). A kind's task role may UpdateItem no other attribute
(``dynamodb:Attributes``); ``test_registry_access`` records a container's writes against moto."""
CONTAINER_CONDITIONS = ("generation", OBSERVER_HOST, "desired", "status")
"""What the container's writes are conditioned on: its own generation (the fence), its host
(pooled), and desired/status (a claim or a STOPPED exit only while the operator still wants
it). DynamoDB counts an attribute a ConditionExpression names in ``dynamodb:Attributes`` as it
counts one the UpdateExpression sets: IAM cannot grant "compare" without "write", so a kind's
role can write these on its own kind's observers (never another kind's: the registry's
partition is the kind, and every grant is held to it by ``dynamodb:LeadingKeys``)."""
CONTAINER_UPDATE_ATTRIBUTES = (
    REGISTRY_PARTITION,
    REGISTRY_SORT,
    *CONTAINER_WRITES,
    *CONTAINER_CONDITIONS,
)
"""A kind's task role's UpdateItem grant on the registry (``ForAllValues:StringEquals`` on
``dynamodb:Attributes``; the key attributes are listed as AWS requires), on its own partition
only (``dynamodb:LeadingKeys``)."""
LEGACY_CONTAINER_UPDATE_ATTRIBUTES = (REGISTRY_KEY, *CONTAINER_WRITES, *CONTAINER_CONDITIONS)
"""The same grant on a name-keyed registry being migrated (its containers' writes): any item, as
before the registry was keyed by kind, until context ``legacyRegistry`` is dropped."""
RECONCILER_OWNED = (
    "kind",
    "config",
    "desired",
    "generation",
    OBSERVER_HOST,
    "task_arn",
    "restarts",
    "consecutive_failures",
    "created_at",
    "next_start_at",
    "next_start_at_ms",
    "failure_reason",
    "restart_generation",
    STATUS_REASON,
    WAITING_ATTRIBUTE,
    *TRACKING_ATTRIBUTES,
)
"""What only the operators' commands and the reconciler write: what an observer is, what it
should be doing and where it runs. No container writes any of them; a kind's role can write only
those of them a container's condition names (``CONTAINER_CONDITIONS``), on its own kind's
observers."""
CONDITION_ONLY = tuple(a for a in RECONCILER_OWNED if a in CONTAINER_CONDITIONS)
"""The reconciler-owned attributes a kind's role can still write, because its fenced writes
compare them: the residue a fence attribute of the container's own would remove."""
