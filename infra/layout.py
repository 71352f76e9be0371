"""Where a stack's jobs and tasks go: one nested stack per shard, and what the shards share.

``ScheduledJob`` and ``BackgroundTask`` ask the stack's ``Layout`` for their home: the shard their
name hashes to (``vigil.contract.layout``), created the first time an entity lands in it. A shard
holds its entities and what they share without widening a grant: one log group (each role may put
events into its own function's streams only) and, for jobs, the role their schedules invoke with.
The stack holds the one queue every job's schedule dead-letters to.

Declarations a layout cannot hold fail the synth naming the constructs: two jobs (or tasks) of one
name (construct ids that differ only in case make the same name), two function names that meet once
cut to Lambda's 64 characters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import NestedStack, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.errors import ConfigurationError
from infra.queues import dead_letter_queue
from infra.roles import InlineRole
from vigil.contract.layout import Entity, function_name, shard_id, shard_of

SCHEDULER = "scheduler.amazonaws.com"
LOG_RETENTION = logs.RetentionDays.ONE_MONTH


class Shard(NestedStack):
    """One nested stack of jobs (or tasks) and what they share in it."""

    def __init__(self, scope: Construct, construct_id: str, *, entity: Entity, index: int) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"Vigil {entity.plural}, shard {index} (the names that hash to it)",
        )
        self.entity = entity
        self.index = index
        self.log_group = logs.LogGroup(
            self, "Logs", retention=LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY
        )
        """Every function of the shard logs here, each into streams named for it (Lambda's
        advanced logging), and each role may write its own function's streams only."""
        self._schedule_role: iam.Role | None = None

    @property
    def schedule_role(self) -> iam.Role:
        """The role the shard's job schedules invoke with: each job adds its own function."""
        if self._schedule_role is None:
            self._schedule_role = InlineRole(
                self,
                "ScheduleRole",
                assumed_by=iam.ServicePrincipal(
                    SCHEDULER,
                    conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
                ),
                description=f"Vigil jobs of shard {self.index}: their schedules invoke them",
            )
        return self._schedule_role


@dataclass
class _Registered:
    owner: str
    """The construct a name belongs to, as an error names it."""


@dataclass
class Layout:
    """A stack's shards and the names declared in them (one per Vigil stack: :meth:`of`)."""

    stack: Stack
    shards: dict[tuple[Entity, int], Shard] = field(default_factory=dict)
    names: dict[tuple[Entity, str], _Registered] = field(default_factory=dict)
    functions: dict[str, _Registered] = field(default_factory=dict)
    _undelivered: sqs.Queue | None = None

    @staticmethod
    def of(scope: Construct) -> Layout:
        """The layout of ``scope``'s stack (the outermost: a shard's scope is its parent's)."""
        known = getattr(scope, "_vigil_layout", None)
        if known is not None:  # the stack, a shard, a job or task: no call into the CDK's process
            return known  # type: ignore[no-any-return]
        stack = Stack.of(scope)
        while isinstance(stack, NestedStack):
            stack = Stack.of(stack.node.scope)  # type: ignore[arg-type]
        layout = getattr(stack, "_vigil_layout", None)
        if layout is None:
            layout = Layout(stack)
            stack._vigil_layout = layout  # type: ignore[attr-defined]
        return layout

    @property
    def stack_name(self) -> str:
        return self.stack.stack_name

    def place(self, entity: Entity, name: str, owner: str) -> Shard:
        """Register ``name`` (refused if taken, or if its function name is) and return its shard."""
        taken = self.names.get((entity, name))
        if taken is not None:
            raise ConfigurationError(
                owner,
                f"{entity.value}_name",
                f"{name!r} is taken by {taken.owner}: {entity.value} names must be unique in a "
                "stack (construct ids that differ only in case make the same name; pass "
                f"{entity.value}_name=...)",
            )
        function = function_name(self.stack_name, entity, name)
        clash = self.functions.get(function)
        if clash is not None:
            raise ConfigurationError(
                owner,
                f"{entity.value}_name",
                f"its function name {function!r} is {clash.owner}'s as well (Lambda's 64 "
                "characters cut both names to the same): pick a shorter or another name",
            )
        self.names[(entity, name)] = _Registered(owner)
        self.functions[function] = _Registered(owner)
        return self.shard(entity, shard_of(entity, name))

    def shard(self, entity: Entity, index: int) -> Shard:
        key = (entity, index)
        if key not in self.shards:
            shard = Shard(self.stack, shard_id(entity, index), entity=entity, index=index)
            shard._vigil_layout = self  # type: ignore[attr-defined]
            self.shards[key] = shard
        return self.shards[key]

    def function_name(self, entity: Entity, name: str) -> str:
        return function_name(self.stack_name, entity, name)

    @property
    def undelivered(self) -> sqs.Queue:
        """The queue every job's schedule sends the ticks it could not deliver to (its message
        names the job: the schedule's input)."""
        if self._undelivered is None:
            self._undelivered = dead_letter_queue(self.stack, "JobsUndelivered")
        return self._undelivered

    @property
    def undelivered_queue(self) -> sqs.Queue | None:
        """The stack's queue of undelivered ticks, if a job made it."""
        return self._undelivered

    def shards_of(self, entity: Entity) -> list[Shard]:
        return [self.shards[key] for key in sorted(self.shards) if key[0] is entity]
