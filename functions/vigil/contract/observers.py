"""The observers' shared names: statuses, the fleet index, the container's exit codes."""

from __future__ import annotations

from enum import IntEnum, StrEnum

from vigil.contract.hosts import OBSERVER_CAPACITY, OBSERVER_TASK_DEFINITION


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


STATUS_REASON = "last_start_error"
"""On an observer's registry item: why it is not running yet (RunTask failed, no host took it),
written by the reconciler with the time it tries again and removed once it starts. The API and
``vigil observers list``/``get`` show it as ``status_reason``."""

FLEET_INDEX = "fleet-index"
"""The registry's index over every observer (partition ``fleet``, sort ``name``)."""
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
TRACKING_ATTRIBUTES = (
    "task_version",
    "task_status",
    "started_at_ms",
    "start_attempts",
    OBSERVER_TASK_DEFINITION,
    OBSERVER_CAPACITY,
)
"""The reconciler's own fields on each item (the task definition and capacity its current task was
started with are projected so a rollout pass finds outdated observers without reading items)."""
FLEET_INDEX_PROJECTION = (*FLEET_INDEX_ATTRIBUTES, *TRACKING_ATTRIBUTES)
"""The non-key attributes the fleet index projects (INCLUDE): a resync decides without reading
items."""
