"""``ObserverFleet``: the registry, the ECS cluster and task definitions, the API and the reconciler.

The container image is built from the project's own ``functions/`` (``functions/observers/Dockerfile``)
by ``cdk deploy``; synth only hashes the folder, so tests and ``python app.py`` need no Docker.

The VPC is a small one by default (public subnets in two AZs, no NAT gateway, tasks get a public IP:
about zero fixed cost). Pass ``vpc`` to use an existing one, or ``vpc_id`` to look it up; a lookup
calls AWS at synth (credentials and an explicit account/region on the stack), and its answer is cached
in ``cdk.context.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.alarms import alarm_above, alarm_above_zero
from infra.errors import ConfigurationError
from infra.function import FUNCTIONS_DIR, vigil_function
from infra.handler_paths import validate_handler
from infra.management_api import (
    API_GATEWAY_TIMEOUT_SECONDS,
    access_log_group,
    api_backed,
    management_api_options,
    restrict_to_operators,
)
from infra.queues import dead_letter_queue
from infra.removal import data_removal_policy, deletion_protected
from infra.stage import stage_environment, stage_of
from infra.writes import check_writes, grant_writes, writes_environment
from vigil.contract.alarms import (
    SHORTFALL_MINUTES,
    STREAM_BEHIND_MINUTES,
    STUCK_PASSES,
    Alarm,
)
from vigil.contract.hosts import (
    DEFAULT_MAX_UNAVAILABLE,
    HOST_EXIT,
    HOST_EXPIRES,
    HOST_SLOTS_ENV,
    HOSTS_KEY,
    HOSTS_TABLE_ENV,
    LIVE_HOST_ATTRIBUTE,
    LIVE_HOSTS_INDEX,
    PLACEMENT_CAPACITY,
    PLACEMENT_MAX_UNAVAILABLE,
    PLACEMENTS_ENV,
    REBALANCE_PREFIX,
    WAITING_ATTRIBUTE,
    WAITING_INDEX,
    WAITING_SORT,
    Capacity,
    Placement,
    host_id_pattern,
)
from vigil.contract.metrics import NAMESPACE, ObserverMetric, dimensions
from vigil.contract.observers import (
    CONTAINER_UPDATE_ATTRIBUTES,
    FLEET_ATTRIBUTE,
    FLEET_INDEX,
    FLEET_INDEX_PROJECTION,
    STOPPED_ATTRIBUTE,
    STOPPED_INDEX,
    STOPPED_INDEX_PROJECTION,
    Desired,
    Status,
)

OWNER = "ObserverFleet"
RECONCILER_TIMEOUT_SECONDS = 180
RESYNC_LEASE_SECONDS = RECONCILER_TIMEOUT_SECONDS + 60
"""A resync lease outlives the pass that took it by a minute (a crashed pass frees it then)."""
STREAM_BEHIND = Duration.minutes(STREAM_BEHIND_MINUTES)
STREAM_MAX_RECORD_AGE = Duration.hours(1)
KIND_NAME = re.compile(r"^[a-z0-9-]{1,63}$")
CONTAINER_NAME = "observer"
FARGATE_MEMORY: dict[int, range] = {
    256: range(512, 2049, 512),
    512: range(1024, 4097, 1024),
    1024: range(2048, 8193, 1024),
    2048: range(4096, 16385, 1024),
    4096: range(8192, 30721, 1024),
    8192: range(16384, 61441, 4096),
    16384: range(32768, 122881, 8192),
}
"""Fargate's valid CPU units -> memory (MiB) combinations (256 CPU also allows 512 MiB)."""


HOST_BASE_MEMORY_MIB = 256
"""Memory a pooled host's own process takes before any observer (Python, boto3, Powertools)."""


@dataclass(frozen=True)
class ObserverKind:
    """One kind of observer: its ``module.function`` under ``functions/``, its task size, how a
    deploy rolls it and the capacity it runs on.

    ``placement="pooled"`` runs up to ``slots_per_host`` observers in one task (a *host*); the
    task must hold them: ``slots_per_host * observer_memory_mib + HOST_BASE_MEMORY_MIB`` at most
    ``memory_mib``. ``headroom`` free slots are kept so a failover never waits for a task to start
    (default: half a host). The three are pooled-only: a dedicated kind refuses them.
    """

    handler: str
    """``module.function`` under ``functions/`` that runs one observer."""
    cpu: int = 256
    """Fargate CPU units of the kind's task (256-16384)."""
    memory_mib: int = 512
    """The task's memory: one Fargate offers with ``cpu``."""
    max_unavailable: int = DEFAULT_MAX_UNAVAILABLE
    """Percent (1-100) of the kind's observers a rollout hands over at once (rounded up, >= 1)."""
    capacity: str = Capacity.ON_DEMAND.value
    """``"on-demand"``, or ``"spot"``: Fargate Spot, falling back to on-demand when it has none."""
    placement: str = Placement.DEDICATED
    """``"dedicated"``: a task per observer; ``"pooled"``: up to ``slots_per_host`` per task."""
    slots_per_host: int | None = None
    """Pooled only: how many observers one host (task) runs."""
    observer_memory_mib: int | None = None
    """Pooled only: the memory one observer needs on its host."""
    headroom: int | None = None
    """Pooled only: free slots kept ready so a failover never waits for a task to start
    (default: half a host)."""
    writes: tuple[Any, ...] = ()
    """Tables, buckets, queues and buses the kind writes through ``ctx.fenced``: named in its
    containers' environment and granted on the kind's own task role (no other kind gets them)."""

    @property
    def pooled(self) -> bool:
        return self.placement == Placement.POOLED

    def options_json(self) -> dict[str, Any]:
        """This kind's entry of ``PLACEMENTS_ENV`` (validated first): read by
        ``vigil.observers.kind_options`` in the reconciler, the API and the containers."""
        options: dict[str, Any] = {
            "placement": str(Placement.DEDICATED),
            PLACEMENT_MAX_UNAVAILABLE: self.max_unavailable,
            PLACEMENT_CAPACITY: Capacity(self.capacity).value,
        }
        if self.pooled:
            slots = self.slots_per_host or 1
            options |= {
                "placement": str(Placement.POOLED),
                "slots_per_host": slots,
                "headroom": self.headroom if self.headroom is not None else slots // 2,
            }
        return options


class ObserverFleet(Construct):
    """Everything observers need; handles are attributes so the stack can wire dashboards.

    Args:
        kinds: the kinds this fleet runs: per name (lowercase, digits, dashes), a handler path
            (``module.function`` under ``functions/``) or an ``ObserverKind``.
        heartbeat_interval: how often an observer's heartbeat is written (at least 5 s); one
            silent for 3 intervals is restarted.
        max_observers: the most observers the registry accepts (the API answers 429 beyond).
        vpc: an existing VPC to run the tasks in (default: a small one, public subnets in two
            AZs, no NAT gateway).
        vpc_id: a VPC looked up at synth (needs credentials and an explicit account and region).
        subnets: which of the VPC's subnets the tasks run in.
        assign_public_ip: whether tasks get a public IP (default: yes in the fleet's own VPC,
            which has no NAT gateway; no in a given one).
        container_insights: ECS Container Insights on the cluster (CPU and memory per kind).
        stop_timeout: how long a stopping observer has to finish before ECS kills it.
        failure_threshold: consecutive failures after which an observer is FAILED and is no
            longer restarted.
        backoff_base: the wait before restarting an observer that failed quickly again
            (doubling with each quick failure).
        backoff_cap: the longest such wait.
        log_retention: how long the observers' and the reconciler's logs are kept.
        removal_policy: what a stack deletion does to the registry and hosts tables (default:
            retained, unless the stack is a throwaway).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kinds: dict[str, str | ObserverKind],
        heartbeat_interval: Duration = Duration.seconds(30),
        max_observers: int = 100,
        vpc: ec2.IVpc | None = None,
        vpc_id: str | None = None,
        subnets: ec2.SubnetSelection | None = None,
        assign_public_ip: bool | None = None,
        container_insights: bool = True,
        stop_timeout: Duration = Duration.seconds(30),
        failure_threshold: int = 5,
        backoff_base: Duration = Duration.seconds(30),
        backoff_cap: Duration = Duration.minutes(15),
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: RemovalPolicy | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.kinds = _validate_kinds(kinds)
        self.kind_writes = {
            kind: check_writes(_kind_failing(f"kinds[{kind!r}].writes"), spec.writes)
            for kind, spec in self.kinds.items()
        }
        heartbeat = _validate(
            heartbeat_interval=heartbeat_interval,
            max_observers=max_observers,
            vpc=vpc,
            vpc_id=vpc_id,
            stop_timeout=stop_timeout,
            failure_threshold=failure_threshold,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
        )
        self.heartbeat_seconds = heartbeat
        self.max_observers = max_observers
        self.kinds_json = Stack.of(self).to_json_string(
            {kind: spec.handler for kind, spec in self.kinds.items()}
        )
        self.placements_json = json.dumps(
            {kind: spec.options_json() for kind, spec in self.kinds.items()}, sort_keys=True
        )
        """``PLACEMENTS_ENV``: per kind, one JSON object of its placement, rollout and capacity."""

        data_policy = removal_policy or data_removal_policy(self)
        self.log_retention = log_retention
        self.table = self._build_registry(data_policy)
        self.idempotency_table = self._build_idempotency_table(data_policy)
        self.hosts_table = self._build_hosts_table(data_policy)
        self.observers_dlq = dead_letter_queue(self, "ObserversDlq")
        """FAILED notices: one message per observer that gave up (read it, fix, restart)."""
        self.events_dlq = dead_letter_queue(self, "EventsDlq")
        """ECS events and resync ticks EventBridge could not deliver to the reconciler."""
        self.stream_dlq = dead_letter_queue(self, "StreamDlq")
        """Registry stream batches the reconciler failed on after its retries."""
        self.reconciler_failures = dead_letter_queue(self, "ReconcilerFailures")
        """ECS events and resync ticks the reconciler failed on after Lambda's async retries."""

        self.vpc, selection, self.assign_public_ip = self._build_network(
            vpc, vpc_id, subnets, assign_public_ip
        )
        self.subnet_ids = self.vpc.select_subnets(
            availability_zones=selection.availability_zones,
            one_per_az=selection.one_per_az,
            subnet_filters=selection.subnet_filters,
            subnet_group_name=selection.subnet_group_name,
            subnets=selection.subnets,
            subnet_type=selection.subnet_type,
        ).subnet_ids
        self.security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=self.vpc,
            description="Vigil observers: outbound only",
            allow_all_outbound=True,
        )
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED
            if container_insights
            else ecs.ContainerInsights.DISABLED,
            # FARGATE and FARGATE_SPOT, for a Spot kind's capacity provider strategy.
            enable_fargate_capacity_providers=any(
                spec.capacity == Capacity.SPOT for spec in self.kinds.values()
            )
            or None,
        )
        self.execution_role = self._build_execution_role()
        self.task_roles = {
            kind: self._build_task_role(kind, spec) for kind, spec in self.kinds.items()
        }
        """One task role per kind: its registry and hosts grants, and its own ``writes``."""
        self.log_group = logs.LogGroup(
            self, "TaskLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.task_definitions = {
            kind: self._build_task_definition(kind, spec, stop_timeout)
            for kind, spec in self.kinds.items()
        }

        self.api_function = self._build_api_function()
        self.api = self._build_rest_api()
        self.reconciler = self._build_reconciler(failure_threshold, backoff_base, backoff_cap)
        self._grant_reconciler()
        self._build_triggers()
        self.alarms = self._build_alarms()

    # Storage -------------------------------------------------------------------------------------

    def _build_registry(self, removal_policy: RemovalPolicy) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            "Registry",
            partition_key=dynamodb.Attribute(name="name", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal_policy,
            deletion_protection=deletion_protected(removal_policy),
        )
        # Two sparse indexes split the fleet by status (contract.observers.status_fields): every
        # observer but the STOPPED ones, so a resync reads the live fleet whatever number of
        # stopped records the account keeps; and the STOPPED ones, projecting their status alone
        # (it does not change while stopped), so heartbeats never write it.
        for index, attribute, projected in (
            (FLEET_INDEX, FLEET_ATTRIBUTE, FLEET_INDEX_PROJECTION),
            (STOPPED_INDEX, STOPPED_ATTRIBUTE, STOPPED_INDEX_PROJECTION),
        ):
            table.add_global_secondary_index(
                index_name=index,
                partition_key=dynamodb.Attribute(
                    name=attribute, type=dynamodb.AttributeType.STRING
                ),
                sort_key=dynamodb.Attribute(name="name", type=dynamodb.AttributeType.STRING),
                projection_type=dynamodb.ProjectionType.INCLUDE,
                non_key_attributes=list(projected),
            )
        if not any(spec.pooled for spec in self.kinds.values()):
            return table
        # Sparse: only pooled observers waiting for a placement (new, backing off, or whose
        # placement is in flight) carry the partition attribute, so the healthy resync reads
        # the waiting few, not the fleet. Only fleets with a pooled kind have it.
        table.add_global_secondary_index(
            index_name=WAITING_INDEX,
            partition_key=dynamodb.Attribute(
                name=WAITING_ATTRIBUTE, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=WAITING_SORT, type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        return table

    def _build_idempotency_table(self, removal_policy: RemovalPolicy) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            "Idempotency",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expiration",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal_policy,
            deletion_protection=deletion_protected(removal_policy),
        )

    def _build_hosts_table(self, removal_policy: RemovalPolicy) -> dynamodb.Table:
        """One item per pooled host task. The passes read the live ones through a sparse,
        keys-only index (``LIVE_HOSTS_INDEX``: heartbeats never write it), so a week of dead
        hosts kept for inspection costs the healthy pass nothing."""
        table = dynamodb.Table(
            self,
            "Hosts",
            partition_key=dynamodb.Attribute(name=HOSTS_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=HOST_EXPIRES,  # dead hosts go a week after their end
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal_policy,
            deletion_protection=deletion_protected(removal_policy),
        )
        table.add_global_secondary_index(
            index_name=LIVE_HOSTS_INDEX,
            partition_key=dynamodb.Attribute(
                name=LIVE_HOST_ATTRIBUTE, type=dynamodb.AttributeType.STRING
            ),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        return table

    # Network and ECS ----------------------------------------------------------------------------

    def _build_network(
        self,
        vpc: ec2.IVpc | None,
        vpc_id: str | None,
        subnets: ec2.SubnetSelection | None,
        assign_public_ip: bool | None,
    ) -> tuple[ec2.IVpc, ec2.SubnetSelection, bool]:
        if vpc is None and vpc_id is None:
            built = ec2.Vpc(
                self,
                "Vpc",
                max_azs=2,
                nat_gateways=0,
                subnet_configuration=[
                    ec2.SubnetConfiguration(
                        name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                    )
                ],
            )
            public = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC)
            return built, subnets or public, True if assign_public_ip is None else assign_public_ip
        if vpc is None:
            vpc = ec2.Vpc.from_lookup(self, "Vpc", vpc_id=vpc_id)
        public_ip = bool(assign_public_ip)
        default = ec2.SubnetSelection(
            subnet_type=ec2.SubnetType.PUBLIC if public_ip else ec2.SubnetType.PRIVATE_WITH_EGRESS
        )
        return vpc, subnets or default, public_ip

    def _build_execution_role(self) -> iam.Role:
        return iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="Pulls the observer image and writes its logs",
        )

    def _build_task_role(self, kind: str, spec: ObserverKind) -> iam.Role:
        """The role of one kind's containers, so one kind's code cannot use another's grants.

        A pooled kind's hosts read and heartbeat their own items: the grant holds only for keys
        that begin with the kind (``host_id_pattern``, ``dynamodb:LeadingKeys``), and only
        GetItem and UpdateItem, which always name their one key (a Scan or Query would name none,
        and ``ForAllValues`` holds for an empty set, hence the ``Null`` check as well). Dedicated
        kinds get no hosts grant. The registry grant reaches every item (its key is the
        observer's name, which does not begin with its kind) but writes only what a container
        writes or compares (``CONTAINER_UPDATE_ATTRIBUTES``): never an observer's kind, config,
        task or placement history; its desired state, generation and host only as far as a
        fenced write compares them (the README's "Least privilege" says so).
        """
        role = iam.Role(
            self,
            f"TaskRole{_construct_suffix(kind)}",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description=f"Vigil observer containers of the kind {kind}",
        )
        # The container reads its own record and writes claims, heartbeats and checkpoints:
        # any item (the key is no kind's), but only the attributes it writes or compares.
        role.add_to_policy(
            iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[self.table.table_arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["dynamodb:UpdateItem"],
                resources=[self.table.table_arn],
                conditions=only_attributes(CONTAINER_UPDATE_ATTRIBUTES),
            )
        )
        if spec.pooled:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                    resources=[self.hosts_table.table_arn],
                    conditions=own_keys(host_id_pattern(kind)),
                )
            )
        grant_writes(role, self.kind_writes[kind])
        return role

    def _build_task_definition(
        self, kind: str, spec: ObserverKind, stop_timeout: Duration
    ) -> ecs.FargateTaskDefinition:
        definition = ecs.FargateTaskDefinition(
            self,
            f"Task{_construct_suffix(kind)}",
            cpu=spec.cpu,
            memory_limit_mib=spec.memory_mib,
            task_role=self.task_roles[kind],
            execution_role=self.execution_role,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        definition.add_container(
            CONTAINER_NAME,
            image=ecs.ContainerImage.from_asset(
                str(FUNCTIONS_DIR),
                file="observers/Dockerfile",
                platform=ecr_assets.Platform.LINUX_AMD64,
                exclude=["**/__pycache__", "**/*.pyc"],
            ),
            # Container-level memory: ECS accepts task-level only, but moto's RunTask needs it.
            memory_limit_mib=spec.memory_mib,
            essential=True,
            stop_timeout=stop_timeout,
            logging=ecs.LogDrivers.aws_logs(stream_prefix=kind, log_group=self.log_group),
            environment={
                **stage_environment(self),
                "VIGIL_OBSERVERS_TABLE": self.table.table_name,
                # Its own kind only: a container (a host's child too) refuses a record of
                # another kind (unknown kind, exit BAD_CONFIGURATION) rather than run its code
                # under this kind's role.
                "VIGIL_OBSERVER_KINDS": json.dumps({kind: spec.handler}),
                "VIGIL_HEARTBEAT_SECONDS": str(self.heartbeat_seconds),
                HOSTS_TABLE_ENV: self.hosts_table.table_name,
                # Not PLACEMENTS_ENV: the container does not read it, and a new rollout budget
                # must not make a new revision (which would roll every observer of every kind).
                **({HOST_SLOTS_ENV: str(spec.slots_per_host)} if spec.pooled else {}),
                **writes_environment(self, self.kind_writes[kind]),
            },
        )
        return definition

    # Functions ----------------------------------------------------------------------------------

    def _build_api_function(self) -> lambda_.Function:
        function = vigil_function(
            self,
            "ApiFunction",
            handler="handlers.observers_api.handler",
            description="Vigil observers management API",
            timeout=Duration.seconds(API_GATEWAY_TIMEOUT_SECONDS),
            environment={
                "VIGIL_OBSERVERS_TABLE": self.table.table_name,
                "VIGIL_IDEMPOTENCY_TABLE": self.idempotency_table.table_name,
                "VIGIL_OBSERVER_KINDS": self.kinds_json,
                "VIGIL_MAX_OBSERVERS": str(self.max_observers),
                "VIGIL_HEARTBEAT_SECONDS": str(self.heartbeat_seconds),
                HOSTS_TABLE_ENV: self.hosts_table.table_name,
                PLACEMENTS_ENV: self.placements_json,
            },
        )
        # Only what the registry's API calls use: reads and list pages, and the transactions of
        # create, stop, restart and settle (TransactWriteItems is authorised per Put and Update
        # action).
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:BatchGetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                ],
                resources=[self.table.table_arn],
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"],
                resources=[
                    f"{self.table.table_arn}/index/{FLEET_INDEX}",
                    f"{self.table.table_arn}/index/{STOPPED_INDEX}",
                ],
            )
        )
        # GET /hosts and the host of GET /observers/{name}: reads of the hosts table.
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:Scan"],
                resources=[self.hosts_table.table_arn],
            )
        )
        # A rebalance request is one marker item per pooled kind (the reconciler acts on it):
        # the API may put those keys and no host's.
        markers = [f"{REBALANCE_PREFIX}{kind}" for kind, spec in self.kinds.items() if spec.pooled]
        if markers:
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:PutItem"],
                    resources=[self.hosts_table.table_arn],
                    conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": markers}},
                )
            )
        self.idempotency_table.grant_read_write_data(function)
        return function

    def _build_rest_api(self) -> apigateway.LambdaRestApi:
        """A proxy REST API; IAM (SigV4) authorization on every method, the root included.

        Every request is access-logged as JSON with the caller's IAM identity; the stage throttles.
        API Gateway writes logs through one role per account and region (``cloud_watch_role``).
        """
        self.api_access_logs = access_log_group(self, self.log_retention)
        api = apigateway.LambdaRestApi(
            self,
            "Api",
            handler=api_backed(self.api_function),
            proxy=True,
            description="Vigil observers",
            **management_api_options(self, self.api_access_logs, "observers"),
        )
        restrict_to_operators(api)
        return api

    def _build_reconciler(
        self, failure_threshold: int, backoff_base: Duration, backoff_cap: Duration
    ) -> lambda_.Function:
        timeout = Duration.seconds(RECONCILER_TIMEOUT_SECONDS)
        function = vigil_function(
            self,
            "Reconciler",
            handler="handlers.reconciler.handler",
            description="Vigil observers reconciler: ECS events, registry stream, minute resync",
            timeout=timeout,
            memory_size=1024,
            environment={
                "VIGIL_OBSERVERS_TABLE": self.table.table_name,
                HOSTS_TABLE_ENV: self.hosts_table.table_name,
                PLACEMENTS_ENV: self.placements_json,
                "VIGIL_CLUSTER_ARN": self.cluster.cluster_arn,
                "VIGIL_TASK_DEFINITIONS": Stack.of(self).to_json_string(
                    {k: d.task_definition_arn for k, d in self.task_definitions.items()}
                ),
                "VIGIL_CONTAINER_NAME": CONTAINER_NAME,
                "VIGIL_SUBNETS": Fn.join(",", self.subnet_ids),
                "VIGIL_SECURITY_GROUPS": self.security_group.security_group_id,
                "VIGIL_ASSIGN_PUBLIC_IP": "true" if self.assign_public_ip else "false",
                "VIGIL_OBSERVERS_DLQ_URL": self.observers_dlq.queue_url,
                "VIGIL_HEARTBEAT_SECONDS": str(self.heartbeat_seconds),
                "VIGIL_FAILURE_THRESHOLD": str(failure_threshold),
                "VIGIL_BACKOFF_BASE_SECONDS": str(int(backoff_base.to_seconds())),
                "VIGIL_BACKOFF_CAP_SECONDS": str(int(backoff_cap.to_seconds())),
                # Longer than the function can run, so a killed pass never leaves two running.
                "VIGIL_RESYNC_LEASE_SECONDS": str(RESYNC_LEASE_SECONDS),
            },
        )
        # EventBridge invokes asynchronously: after Lambda's retries a failed event is kept (the
        # destination record holds the event and the error), never only logged.
        function.configure_async_invoke(
            on_failure=destinations.SqsDestination(self.reconciler_failures),
            retry_attempts=2,
            max_event_age=Duration.hours(1),
        )
        return function

    def _grant_reconciler(self) -> None:
        """Least privilege: this fleet's table, task definitions, cluster, roles and queue."""
        role = self.reconciler
        stack = Stack.of(self)
        role.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"],
                resources=[
                    self.table.table_arn,
                    f"{self.table.table_arn}/index/{FLEET_INDEX}",
                    f"{self.table.table_arn}/index/{STOPPED_INDEX}",
                    *(
                        [f"{self.table.table_arn}/index/{WAITING_INDEX}"]
                        if any(spec.pooled for spec in self.kinds.values())
                        else []
                    ),
                ],
            )
        )
        role.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:Scan",
                    "dynamodb:Query",
                    "dynamodb:DeleteItem",  # a rebalance request, once acted on
                    "dynamodb:BatchGetItem",  # the live hosts the index lists
                ],
                resources=[
                    self.hosts_table.table_arn,
                    f"{self.hosts_table.table_arn}/index/{LIVE_HOSTS_INDEX}",
                ],
            )
        )
        families = [
            stack.format_arn(
                service="ecs", resource="task-definition", resource_name=f"{d.family}:*"
            )
            for d in self.task_definitions.values()
        ]
        on_cluster = {"ArnEquals": {"ecs:cluster": self.cluster.cluster_arn}}
        tasks = stack.format_arn(
            service="ecs", resource="task", resource_name=f"{self.cluster.cluster_name}/*"
        )
        role.add_to_role_policy(
            iam.PolicyStatement(actions=["ecs:RunTask"], resources=families, conditions=on_cluster)
        )
        role.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ecs:StopTask", "ecs:DescribeTasks"],
                resources=[tasks],
                conditions=on_cluster,
            )
        )
        # ListTasks (a read) has no resource type of its own: "*", narrowed to the cluster.
        role.add_to_role_policy(
            iam.PolicyStatement(actions=["ecs:ListTasks"], resources=["*"], conditions=on_cluster)
        )
        role.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ecs:TagResource"],
                resources=[tasks],
                conditions={"StringEquals": {"ecs:CreateAction": "RunTask"}},
            )
        )
        role.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[
                    *(role.role_arn for role in self.task_roles.values()),
                    self.execution_role.role_arn,
                ],
                conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
            )
        )
        self.observers_dlq.grant_send_messages(role)

    def _build_triggers(self) -> None:
        target_options: dict[str, Any] = {
            "dead_letter_queue": self.events_dlq,
            "retry_attempts": 4,
            "max_event_age": Duration.hours(2),
        }
        self.task_events_rule = events.Rule(
            self,
            "TaskStateChanges",
            description="ECS task state changes of the observer fleet's cluster",
            event_pattern=events.EventPattern(
                source=["aws.ecs"],
                detail_type=["ECS Task State Change"],
                detail={"clusterArn": [self.cluster.cluster_arn]},
            ),
            targets=[events_targets.LambdaFunction(self.reconciler, **target_options)],
        )
        self.resync_rule = events.Rule(
            self,
            "Resync",
            description="The reconciler's periodic level-triggered pass",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            targets=[
                events_targets.LambdaFunction(
                    self.reconciler,
                    dead_letter_queue=self.events_dlq,
                    retry_attempts=0,  # the next minute's tick is the retry
                    max_event_age=Duration.minutes(1),
                )
            ],
        )
        self.reconciler.add_event_source(
            event_sources.DynamoEventSource(
                self.table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=50,
                max_batching_window=Duration.seconds(1),
                bisect_batch_on_error=True,
                retry_attempts=5,
                max_record_age=STREAM_MAX_RECORD_AGE,
                on_failure=event_sources.SqsDlq(self.stream_dlq),
                filters=_stream_filters(),
            )
        )

    # Alarms -------------------------------------------------------------------------------------

    def _build_alarms(self) -> dict[str, cloudwatch.Alarm]:
        alarms = {
            name: alarm_above_zero(
                self,
                f"{name}Alarm",
                alarm=alarm,
                description=f"Vigil observers: messages on {name}",
                metric=queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1), statistic="Maximum"
                ),
            )
            for name, alarm, queue in (
                ("ObserversDlq", Alarm.OBSERVERS_DLQ, self.observers_dlq),
                ("EventsDlq", Alarm.EVENTS_DLQ, self.events_dlq),
                ("StreamDlq", Alarm.STREAM_DLQ, self.stream_dlq),
                ("ReconcilerFailures", Alarm.RECONCILER_FAILURES, self.reconciler_failures),
            )
        }
        self.failed_metric = self.metric(ObserverMetric.FAILED)
        alarms["ObserversFailed"] = alarm_above_zero(
            self,
            "ObserversFailedAlarm",
            alarm=Alarm.OBSERVERS_FAILED,
            description="Vigil observers: an observer gave up (FAILED)",
            metric=self.failed_metric,
        )
        alarms["ObserversInFailed"] = alarm_above_zero(
            self,
            "ObserversInFailedAlarm",
            alarm=Alarm.OBSERVERS_IN_FAILED,
            description="Vigil observers: at least one observer is FAILED; fix it, then restart it",
            metric=self.metric(ObserverMetric.FLEET_FAILED, "Maximum", Duration.minutes(1)),
        )
        alarms["FleetShortfall"] = alarm_above_zero(
            self,
            "FleetShortfallAlarm",
            alarm=Alarm.FLEET_SHORTFALL,
            description=f"Vigil observers: fewer running than desired for {SHORTFALL_MINUTES} "
            "minutes (starts failing, crash loops, capacity)",
            metric=self.shortfall_metric(),
        )
        for kind in self.pooled_kinds:
            alarms.update(self._host_alarms(kind))
        for kind in self.kinds:
            alarms[f"ObserverUncertain-{kind}"] = alarm_above_zero(
                self,
                f"ObserverUncertainAlarm-{kind}",
                alarm=Alarm.OBSERVER_UNCERTAIN,
                description=f"Vigil observers: an observer of kind {kind} stopped UNCERTAIN: "
                "ctx.once found an effect an earlier generation began and never recorded done; "
                "it is FAILED, not restarted. `vigil observers list --status FAILED` (its "
                "UNCERTAIN column names the effect); once you know whether it happened: "
                "`vigil observers settle NAME --effect EFFECT --done` (or `--not-done`; it "
                "restarts)",
                metric=self.kind_metric(ObserverMetric.UNCERTAIN, kind),
            )
        alarms.update(self._stuck_alarms())
        alarms["ReconcilerErrors"] = alarm_above_zero(
            self,
            "ReconcilerErrorsAlarm",
            alarm=Alarm.RECONCILER_ERRORS,
            description="Vigil observers: the reconciler function failed (see its logs)",
            metric=self.reconciler.metric_errors(period=Duration.minutes(5), statistic="Sum"),
        )
        behind = int(STREAM_BEHIND.to_minutes())
        alarms["StreamBehind"] = alarm_above(
            self,
            "StreamBehindAlarm",
            alarm=Alarm.STREAM_BEHIND,
            description=f"Vigil observers: the reconciler has been over {behind} minutes behind "
            f"the registry stream for {STUCK_PASSES} consecutive minutes: creates, stops and "
            "restarts wait (the minute resync still acts on them), and changes older than "
            f"{int(STREAM_MAX_RECORD_AGE.to_hours())} h go to StreamDlq unhandled. Type `aws "
            f"lambda list-event-source-mappings --function-name {self.reconciler.function_name}` "
            "(State, LastProcessingResult), then see the reconciler's errors, throttles and "
            "duration on the dashboard and search its log group for the failing batch.",
            metric=self.stream_iterator_age(),
            threshold=STREAM_BEHIND.to_milliseconds(),
        )
        alarms["Api5xx"] = alarm_above_zero(
            self,
            "Api5xxAlarm",
            alarm=Alarm.API_5XX,
            description="Vigil observers API: server errors (5XX)",
            metric=self.api.metric_server_error(period=Duration.minutes(5), statistic="Sum"),
        )
        return alarms

    STUCK_METRICS = (
        ObserverMetric.RESYNC_SKIPPED,
        ObserverMetric.PASS_ERRORS,
        ObserverMetric.STOP_FAILED,
        ObserverMetric.HEARTBEAT_STALE,
    )
    """What each resync counts of the states that can stick (the dashboard plots them too)."""

    def _stuck_alarms(self) -> dict[str, cloudwatch.Alarm]:
        """States that can stick without a status to show them: each counted by every resync,
        alarmed when it lasts ``STUCK_PASSES`` consecutive minutes."""
        stuck = {
            "ResyncSkipped": Alarm.RESYNC_SKIPPED,
            "ObserverErrors": Alarm.OBSERVER_ERRORS,
            "StopNotCompleted": Alarm.STOP_NOT_COMPLETED,
            "HeartbeatStale": Alarm.HEARTBEAT_STALE,
        }
        passes = f"{STUCK_PASSES} consecutive minutes"
        logs = "the reconciler's log group"
        descriptions = {
            "ResyncSkipped": f"Vigil observers: the resync was skipped for {passes}: its lease is "
            f"held (a pass longer than a minute, or a release that never landed: it expires "
            f"after {RESYNC_LEASE_SECONDS} s). Observers whose ECS events were lost wait meanwhile. Type `aws "
            'dynamodb get-item --table-name TABLE --key \'{"name":{"S":"#resync"}}\'` on the '
            f"observers table for lease_holder (a request id) and lease_until, then find that "
            f"request id in {logs}.",
            "ObserverErrors": f"Vigil observers: the resync skipped observers after AWS errors "
            f"for {passes} (throttled writes, denied or failing ECS calls). Search {logs} for "
            "'observer skipped this pass after an AWS error' (it names each observer and its "
            "error), then type `vigil observers get NAME`.",
            "StopNotCompleted": "Vigil observers: an observer asked to stop still runs (and "
            f"bills): StopTask failed for {passes}. Type `vigil observers list --status "
            "STOPPING`, then `vigil observers get NAME`: status_reason names ECS's error (often "
            "the reconciler's ecs:StopTask permission or a throttle).",
            "HeartbeatStale": "Vigil observers: RUNNING observers' heartbeats have been older "
            f"than 3 intervals for {passes}: the reconciler cannot replace them (writes to their "
            "records failing or throttled) while the shortfall alarm still counts them running. "
            "Type `vigil observers list --status RUNNING` and `vigil observers get NAME` "
            f"(heartbeat age, task), then search {logs} for the observer.",
        }
        return {
            name: alarm_above_zero(
                self,
                f"{name}Alarm",
                alarm=alarm,
                description=descriptions[name],
                metric=self.metric(metric, "Sum", Duration.minutes(1)),
            )
            for (name, alarm), metric in zip(stuck.items(), self.STUCK_METRICS, strict=True)
        }

    def _host_alarms(self, kind: str) -> dict[str, cloudwatch.Alarm]:
        """A pooled kind's hosts: one lost (its observers were moved; find out why), or hosts
        that do not start (RunTask refused: capacity, quota; or a task that never heartbeats)."""
        look = f"`vigil hosts list --kind {kind}` (status, reason, heartbeat age)"
        return {
            f"HostLost-{kind}": alarm_above_zero(
                self,
                f"HostLostAlarm-{kind}",
                alarm=Alarm.HOST_LOST,
                description=f"Vigil observers: a host of the pooled kind {kind} was LOST (no "
                f"heartbeat for 3 intervals, or its task stopped); its observers were moved. "
                f"Type {look}, then `vigil observers list` for where they run now.",
                metric=self.kind_metric(ObserverMetric.HOST_LOST, kind),
            ),
            f"HostsStuckStarting-{kind}": alarm_above_zero(
                self,
                f"HostsStuckStartingAlarm-{kind}",
                alarm=Alarm.HOSTS_STUCK_STARTING,
                description=f"Vigil observers: hosts of the pooled kind {kind} have been "
                f"STARTING longer than the start timeout (RunTask failing: no capacity, a quota; "
                f"or the task never heartbeats); observers wait for them. Type {look}; the "
                "reason names ECS's answer.",
                metric=self.kind_metric(
                    ObserverMetric.HOSTS_STUCK_STARTING, kind, "Maximum", Duration.minutes(1)
                ),
            ),
        }

    # Monitoring handles -------------------------------------------------------------------------

    @property
    def pooled_kinds(self) -> list[str]:
        return sorted(kind for kind, spec in self.kinds.items() if spec.pooled)

    def kind_metric(
        self,
        metric: ObserverMetric,
        kind: str,
        statistic: str = "Sum",
        period: Duration = Duration.minutes(5),
    ) -> cloudwatch.Metric:
        """A metric the reconciler emits per kind (``kind`` dimension)."""
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=str(metric),
            dimensions_map=dimensions(stage_of(self), kind=kind),
            statistic=statistic,
            period=period,
        )

    def metric(
        self, metric: ObserverMetric, statistic: str = "Sum", period: Duration = Duration.minutes(5)
    ) -> cloudwatch.Metric:
        """A fleet-wide metric the reconciler emits."""
        return fleet_metric(metric, statistic, period, stage=stage_of(self))

    def stream_iterator_age(self) -> cloudwatch.Metric:
        """How old the newest registry change the reconciler has read is, when read (ms): its
        only stream event source, so the function's ``IteratorAge`` is that stream's."""
        return self.reconciler.metric(
            "IteratorAge", statistic="Maximum", period=Duration.minutes(1)
        )

    def shortfall_metric(self) -> cloudwatch.MathExpression:
        """Observers wanted running minus observers running, as each resync saw them, less those
        in a planned hand-over within their kind's ``max_unavailable`` (a rollout is no shortfall)."""
        return cloudwatch.MathExpression(
            expression="desired - running - FILL(handover, 0)",
            using_metrics={
                "desired": self.metric(
                    ObserverMetric.FLEET_DESIRED, "Maximum", Duration.minutes(1)
                ),
                "running": self.metric(
                    ObserverMetric.FLEET_RUNNING, "Maximum", Duration.minutes(1)
                ),
                "handover": self.metric(
                    ObserverMetric.FLEET_HANDING_OVER, "Maximum", Duration.minutes(1)
                ),
            },
            label="running below desired",
            period=Duration.minutes(1),
        )


def fleet_metric(
    metric: ObserverMetric,
    statistic: str = "Sum",
    period: Duration = Duration.minutes(5),
    *,
    stage: str | None,
) -> cloudwatch.Metric:
    """A fleet-wide Powertools metric the API, reconciler or containers of ``stage`` emit."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=str(metric),  # a plain str: jsii would take an Enum for its own
        dimensions_map=dimensions(stage),
        statistic=statistic,
        period=period,
    )


def _stream_filters() -> list[dict[str, Any]]:
    """Wake the reconciler for creates, stops, restart requests and host exits, not heartbeats.

    The handler checks the same conditions (``needs_attention``); this saves the invocations.
    """
    image = ["dynamodb", "NewImage"]

    def pattern(event_name: str, new_image: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"eventName": [event_name]}
        if new_image:
            body[image[0]] = {image[1]: new_image}
        return dict(lambda_.FilterCriteria.filter(body))

    live = [str(status) for status in (Status.STARTING, Status.RUNNING, Status.STOPPING)]
    return [
        pattern("INSERT"),
        pattern("MODIFY", {"status": {"S": [str(Status.PENDING)]}}),
        pattern("MODIFY", {"desired": {"S": [str(Desired.STOPPED)]}, "status": {"S": live}}),
        pattern("MODIFY", {"restart_generation": {"N": [{"exists": True}]}}),
        # A pooled observer's child exited: its host's report stands for a task's STOPPED event.
        pattern("MODIFY", {HOST_EXIT: {"M": {"generation": {"N": [{"exists": True}]}}}}),
    ]


def own_keys(pattern: str) -> dict[str, Any]:
    """An IAM condition: every partition key the request names matches ``pattern`` (StringLike),
    and it names at least one (``ForAllValues`` alone holds for none: a Scan)."""
    return {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [pattern]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    }


def only_attributes(attributes: Sequence[str]) -> dict[str, Any]:
    """An IAM condition: the request names (sets, removes or compares) no top-level attribute
    but ``attributes`` (``dynamodb:Attributes``; the key must be among them), and names one.

    ``ReturnValues`` stays free: the container's claim and heartbeat read the whole record back
    (ALL_NEW), which AWS's attribute-level examples forbid to keep *reads* to the list. Reads are
    not narrowed here (GetItem reads the whole item too); writes are."""
    return {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": list(attributes)},
        "Null": {"dynamodb:Attributes": "false"},
    }


def _construct_suffix(kind: str) -> str:
    """``pooled-ticker`` -> ``PooledTicker``: a kind's part of its constructs' ids."""
    return "".join(part.capitalize() for part in kind.split("-"))


def _kind_failing(parameter: str) -> Callable[[str, str], ConfigurationError]:
    """``check_writes``'s failure for one kind: the parameter is the kind's ``writes``."""
    return lambda _, problem: ConfigurationError(OWNER, parameter, problem)


def _validate_kinds(kinds: dict[str, str | ObserverKind]) -> dict[str, ObserverKind]:
    if not isinstance(kinds, dict) or not kinds:
        raise ConfigurationError(OWNER, "kinds", "needs at least one kind")
    checked: dict[str, ObserverKind] = {}
    for kind, value in kinds.items():
        if not isinstance(kind, str) or not KIND_NAME.fullmatch(kind):
            raise ConfigurationError(OWNER, "kinds", f"kind {kind!r} must match [a-z0-9-]{{1,63}}")
        spec = ObserverKind(handler=value) if isinstance(value, str) else value
        if not isinstance(spec, ObserverKind):
            raise ConfigurationError(
                OWNER, f"kinds[{kind!r}]", "must be a 'module.function' or an ObserverKind"
            )
        problem = validate_handler(spec.handler, FUNCTIONS_DIR)
        if problem:
            raise ConfigurationError(OWNER, f"kinds[{kind!r}].handler", problem)
        allowed = FARGATE_MEMORY.get(spec.cpu)
        if allowed is None:
            raise ConfigurationError(
                OWNER, f"kinds[{kind!r}].cpu", f"{spec.cpu} is not one of {sorted(FARGATE_MEMORY)}"
            )
        if spec.memory_mib not in allowed:
            raise ConfigurationError(
                OWNER,
                f"kinds[{kind!r}].memory_mib",
                f"{spec.memory_mib} MiB is not valid with {spec.cpu} CPU units on Fargate "
                f"({allowed.start}-{allowed.stop - 1} MiB in steps of {allowed.step})",
            )
        _validate_rollout(kind, spec)
        _validate_placement(kind, spec)
        checked[kind] = spec
    return checked


def _validate_rollout(kind: str, spec: ObserverKind) -> None:
    percent = spec.max_unavailable
    if isinstance(percent, bool) or not isinstance(percent, int) or not 1 <= percent <= 100:
        raise ConfigurationError(
            OWNER, f"kinds[{kind!r}].max_unavailable", f"{percent!r} is not a percent in 1-100"
        )
    if spec.capacity not in set(Capacity):
        raise ConfigurationError(
            OWNER,
            f"kinds[{kind!r}].capacity",
            f"{spec.capacity!r} is not one of {[c.value for c in Capacity]}",
        )


def _validate_placement(kind: str, spec: ObserverKind) -> None:
    """K >= 1 that fits the task's memory at the stated per-observer memory; headroom >= 0."""
    where = f"kinds[{kind!r}]"
    if spec.placement not in tuple(Placement):
        raise ConfigurationError(
            OWNER, f"{where}.placement", f"{spec.placement!r} is not 'dedicated' or 'pooled'"
        )
    pooled_only = {
        "slots_per_host": spec.slots_per_host,
        "observer_memory_mib": spec.observer_memory_mib,
        "headroom": spec.headroom,
    }
    if not spec.pooled:
        for parameter, value in pooled_only.items():
            if value is not None:
                raise ConfigurationError(
                    OWNER, f"{where}.{parameter}", "applies only to placement='pooled'"
                )
        return
    slots = spec.slots_per_host
    if not isinstance(slots, int) or slots < 1:
        raise ConfigurationError(OWNER, f"{where}.slots_per_host", f"{slots!r} must be at least 1")
    per = spec.observer_memory_mib
    if not isinstance(per, int) or per < 1:
        raise ConfigurationError(
            OWNER, f"{where}.observer_memory_mib", f"{per!r} must be a positive number of MiB"
        )
    needed = slots * per + HOST_BASE_MEMORY_MIB
    if needed > spec.memory_mib:
        raise ConfigurationError(
            OWNER,
            f"{where}.slots_per_host",
            f"{slots} x {per} MiB + {HOST_BASE_MEMORY_MIB} MiB host base = {needed} MiB does not "
            f"fit memory_mib={spec.memory_mib}",
        )
    if spec.headroom is not None and (not isinstance(spec.headroom, int) or spec.headroom < 0):
        raise ConfigurationError(OWNER, f"{where}.headroom", f"{spec.headroom!r} must be >= 0")


def _validate(
    *,
    heartbeat_interval: Duration,
    max_observers: int,
    vpc: ec2.IVpc | None,
    vpc_id: str | None,
    stop_timeout: Duration,
    failure_threshold: int,
    backoff_base: Duration,
    backoff_cap: Duration,
) -> int:
    """Checks the scalar parameters; returns the heartbeat interval in whole seconds."""
    heartbeat = heartbeat_interval.to_seconds()
    if heartbeat < 5:
        raise ConfigurationError(OWNER, "heartbeat_interval", f"{heartbeat} s is below 5 s")
    if not isinstance(max_observers, int) or max_observers < 1:
        raise ConfigurationError(OWNER, "max_observers", f"{max_observers!r} must be at least 1")
    if vpc is not None and vpc_id is not None:
        raise ConfigurationError(OWNER, "vpc_id", "give either vpc or vpc_id, not both")
    if vpc_id is not None and not re.fullmatch(r"vpc-[0-9a-f]{8,17}", vpc_id):
        raise ConfigurationError(OWNER, "vpc_id", f"{vpc_id!r} is not a VPC id (vpc-...)")
    if not 2 <= stop_timeout.to_seconds() <= 120:
        raise ConfigurationError(OWNER, "stop_timeout", "Fargate allows 2-120 seconds")
    if failure_threshold < 1:
        raise ConfigurationError(OWNER, "failure_threshold", "must be at least 1")
    if backoff_base.to_seconds() < 1 or backoff_cap.to_seconds() < backoff_base.to_seconds():
        raise ConfigurationError(OWNER, "backoff_cap", "needs 1 s <= backoff_base <= backoff_cap")
    return int(heartbeat)
