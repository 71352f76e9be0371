"""``ObserverFleet``: the registry, the ECS cluster and task definitions, the API and the reconciler
that keep observers running; ``ObserverKind``: one kind of observer it runs.

Import both from here (``from infra.observer_fleet import ObserverFleet, ObserverKind``); the
modules of this package build one capability each:

- ``kinds``: ``ObserverKind`` and the validation of the kinds a fleet runs;
- ``registry``: the registry table, its stream and indexes, and the API's idempotency table;
- ``network``: the VPC, subnets, public IP and security group the tasks run in;
- ``tasks``: the cluster, and per kind a task role and a Fargate task definition;
- ``hosts``: the pooled hosts' table and each principal's grant on it;
- ``api``: the management API's observers function and REST API;
- ``reconciler``: the reconciler, its grants and its triggers (ECS events, the stream, the resync);
- ``alarms``: the fleet's alarms and the metrics they watch;
- ``dashboard``: the fleet's rows of the stack's dashboard;
- ``fleet``: the construct that validates its parameters and composes them.
"""

from infra.observer_fleet.alarms import STREAM_BEHIND, fleet_metric
from infra.observer_fleet.fleet import ObserverFleet
from infra.observer_fleet.hosts import own_keys
from infra.observer_fleet.kinds import HOST_BASE_MEMORY_MIB, ObserverKind
from infra.observer_fleet.tasks import only_attributes

__all__ = [
    "HOST_BASE_MEMORY_MIB",
    "STREAM_BEHIND",
    "ObserverFleet",
    "ObserverKind",
    "fleet_metric",
    "only_attributes",
    "own_keys",
]
