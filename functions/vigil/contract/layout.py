"""Where a stack's jobs and tasks live and what they are called: the names infra gives them and
the runtime, the CLI, the kit and the emulator find them by (docs/design/scale.md).

Jobs and tasks live in nested stacks, *shards*, chosen by a stable hash of their name, so adding or
removing one never moves another (a move would replace its resources, and its function's fixed name
would collide with itself). The shard counts are therefore fixed for good: changing them moves
nearly every job.

Their functions have fixed names built from the stack's (``Vigil_job_cleanup``): a role can be
granted its own function's log streams in a shared log group, and a function found from its
job's name. A stack name has no ``_`` (``vigil.contract.stages``), so ``<stack>_`` starts the
names of one stack's functions only.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

JOB_SHARDS = 8
"""Nested stacks jobs are spread over (about 60 jobs fit one: CloudFormation's 500 resources)."""
TASK_SHARDS = 8
"""Nested stacks tasks are spread over (about 55 tasks fit one)."""
FUNCTION_NAME_LIMIT = 64
"""Lambda's longest function name."""
DIGEST_LENGTH = 8
"""Hex digits of the digest that ends a function name cut to fit."""
CATALOG_ROOT = "/vigil"
"""SSM parameters of every stack's catalogs: ``/vigil/<stack>/<kind>/<n>``."""
CATALOG_PARAMETER_LIMIT = 4096
"""SSM's largest standard parameter value (characters): one catalog part at most."""
CATALOG_SHARED_PART = "stack"
"""The part of a catalog that holds what every entry shares (the tasks' table and group)."""
CONSTRUCT_FIELD = "construct"
"""A catalog entry's construct id (``Cleanup``): what the job's resources were named after in the
one-stack layout, so an upgrade finds the queues it retained (``vigil upgrade drain``)."""
STACK_ENV = "VIGIL_STACK"
"""The stack whose catalogs a process reads (the stack's own functions get it; so can an
application in another stack: the catalog's path follows from the stack's name)."""
CATALOG_DIGEST_ENV = "VIGIL_CATALOG_DIGEST"
"""A digest of the declared entries, in the environment of the functions that read a catalog:
declarations that change replace their warm containers, whose copy would be stale."""


class Catalogued(StrEnum):
    """What a stack keeps a catalog of, in SSM (``vigil.catalog``): its value ends the path."""

    JOBS = "jobs"
    TASKS = "tasks"
    KINDS = "kinds"
    """The observer kinds' task definitions (the reconciler's; their number grows with kinds)."""


class KindField(StrEnum):
    """A kinds catalog entry's fields: what the API and the reconciler know of each kind (their
    environment held it once, and grew past Lambda's 4 KB near twenty kinds)."""

    HANDLER = "handler"
    """``module.function``: what ``VIGIL_OBSERVER_KINDS`` maps the kind to."""
    OPTIONS = "options"
    """Its placement, rollout and capacity: what ``VIGIL_OBSERVER_PLACEMENTS`` maps it to."""
    TASK_DEFINITION = "task_definition"
    """Its task definition's ARN: what ``VIGIL_TASK_DEFINITIONS`` maps it to."""


class Entity(StrEnum):
    """What a shard holds; its value names the functions and the shards."""

    JOB = "job"
    TASK = "task"

    @property
    def shards(self) -> int:
        return JOB_SHARDS if self is Entity.JOB else TASK_SHARDS

    @property
    def plural(self) -> str:
        return f"{self.value}s"

    @property
    def catalogued(self) -> Catalogued:
        return Catalogued(self.plural)


def _digest(text: str, length: int = DIGEST_LENGTH) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def shard_of(entity: Entity, name: str) -> int:
    """The shard a job or task lives in, for good: a stable hash of its name."""
    return int(_digest(f"{entity.value}:{name}", 16), 16) % entity.shards


def function_prefix(stack: str, entity: Entity) -> str:
    """What every function name of ``stack``'s jobs (or tasks) starts with, and no other's."""
    return f"{stack}_{entity.value}_"


def function_name(stack: str, entity: Entity, name: str) -> str:
    """A job's or task's function name: ``<stack>_job_<name>``, or, past Lambda's 64 characters,
    the name cut and ended with a digest of the whole (so two cut names never meet)."""
    full = f"{function_prefix(stack, entity)}{name}"
    if len(full) <= FUNCTION_NAME_LIMIT:
        return full
    keep = FUNCTION_NAME_LIMIT - DIGEST_LENGTH - 1
    return f"{full[:keep]}-{_digest(full)}"


def shortest_function_name(stack: str) -> str:
    """The shortest a cut function name of ``stack`` can be: its prefix, one character of the
    name, the digest. A stage whose stack leaves no room for it is refused."""
    return f"{function_prefix(stack, Entity.TASK)}x-{'0' * DIGEST_LENGTH}"


def role_path(stack: str, region: str) -> str:
    """The IAM path of a stack's roles: IAM names are global, so the region is in it, and a grant
    over all of one stack's roles of a kind is one ARN pattern."""
    return f"/vigil/{stack}/{region}/"


def task_schedule_role_path(stack: str, region: str) -> str:
    """The path of the roles a stack's tasks' one-time schedules send with (one per task): the
    tasks API may pass any role under it to Scheduler, and no other."""
    return f"{role_path(stack, region)}task-schedules/"


def catalog_path(stack: str, catalogued: Catalogued) -> str:
    """The SSM path whose parameters hold ``stack``'s catalog of jobs (tasks, kinds)."""
    return f"{CATALOG_ROOT}/{stack}/{catalogued.value}"


def shard_id(entity: Entity, shard: int) -> str:
    """The construct id of a shard (``Jobs3``): its nested stack's logical id starts with it."""
    return f"{entity.plural.capitalize()}{shard}"
