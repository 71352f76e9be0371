"""``ObserverFleet``: the construct an app declares to run observers. It validates its
parameters and composes the fleet from the modules beside it, one capability each: the registry,
the network, the tasks, the pooled hosts, the management API, the reconciler, the alarms (and the
dashboard rows ``Monitoring`` adds). Handles stay attributes, so the stack can wire dashboards."""

from __future__ import annotations

import json
import re

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.catalogs import Catalog, Filled
from infra.errors import ConfigurationError
from infra.observer_fleet import alarms, api, hosts, network, reconciler, registry, tasks
from infra.observer_fleet.kinds import OWNER, ObserverKind, kind_failing, validate_kinds
from infra.queues import dead_letter_queue
from infra.quotas import task_definition_arn
from infra.removal import data_removal_policy
from infra.stage import stage_of
from infra.writes import check_writes
from vigil.contract.layout import Catalogued, KindField
from vigil.contract.metrics import ObserverMetric


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
        self.kinds = validate_kinds(kinds)
        self.kind_writes = {
            kind: check_writes(kind_failing(f"kinds[{kind!r}].writes"), spec.writes)
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
        self.placements_json = json.dumps(
            {kind: spec.options_json() for kind, spec in self.kinds.items()}, sort_keys=True
        )
        """Per kind, one JSON object of its placement, rollout and capacity (``PLACEMENTS_ENV``
        as the API and the reconciler read it from the kinds catalog)."""

        data_policy = removal_policy or data_removal_policy(self)
        self.log_retention = log_retention
        self.table = registry.build_registry(self, data_policy, pooled=bool(self.pooled_kinds))
        self.name_keyed_table = registry.build_legacy_registry(
            self, data_policy, pooled=bool(self.pooled_kinds)
        )
        """The registry keyed by name of deployments from before it was keyed by kind, kept in
        the stack as they made it (empty in a stack that never had one): a deploy that left out
        ``legacyRegistry=true`` takes it out of nothing, and the next one with it migrates."""
        self.legacy_table = self.name_keyed_table if registry.legacy_registry_wanted(self) else None
        """That table while its observers move over (context ``legacyRegistry=true``): wired to
        the reconciler and the task roles; ``vigil observers migrate`` says when it can go."""
        self.idempotency_table = registry.build_idempotency_table(self, data_policy)
        self.hosts_table = hosts.build_hosts_table(self, data_policy)
        self.observers_dlq = dead_letter_queue(self, "ObserversDlq")
        """FAILED notices: one message per observer that gave up (read it, fix, restart)."""
        self.events_dlq = dead_letter_queue(self, "EventsDlq")
        """ECS events and resync ticks EventBridge could not deliver to the reconciler."""
        self.stream_dlq = dead_letter_queue(self, "StreamDlq")
        """Registry stream batches the reconciler failed on after its retries."""
        self.reconciler_failures = dead_letter_queue(self, "ReconcilerFailures")
        """ECS events and resync ticks the reconciler failed on after Lambda's async retries."""

        self.network = network.build_network(self, vpc, vpc_id, subnets, assign_public_ip)
        self.vpc = self.network.vpc
        self.subnet_ids = self.network.subnet_ids
        self.assign_public_ip = self.network.assign_public_ip
        self.security_group = self.network.security_group
        self.cluster = tasks.build_cluster(self, self.vpc, self.kinds, insights=container_insights)
        self.execution_role = tasks.build_execution_role(self)
        self.task_roles = {
            kind: tasks.build_task_role(
                self,
                kind,
                spec,
                registry=self.table,
                hosts=self.hosts_table,
                writes=self.kind_writes[kind],
                legacy=self.legacy_table,
            )
            for kind, spec in self.kinds.items()
        }
        """One task role per kind: its registry and hosts grants, and its own ``writes``."""
        self.log_group = tasks.build_log_group(self, log_retention)
        self.task_definitions = {
            kind: tasks.build_task_definition(
                self,
                kind,
                spec,
                task_role=self.task_roles[kind],
                execution_role=self.execution_role,
                log_group=self.log_group,
                stop_timeout=stop_timeout,
                registry=self.table,
                hosts=self.hosts_table,
                heartbeat_seconds=self.heartbeat_seconds,
                writes=self.kind_writes[kind],
            )
            for kind, spec in self.kinds.items()
        }

        self.kinds_catalog = Catalog(
            self,
            "KindsCatalog",
            catalogued=Catalogued.KINDS,
            entries={
                kind: {
                    KindField.HANDLER: self.kinds[kind].handler,
                    KindField.OPTIONS: self.kinds[kind].options_json(),
                    KindField.TASK_DEFINITION: Filled(
                        definition.task_definition_arn, task_definition_arn(definition.family)
                    ),
                }
                for kind, definition in self.task_definitions.items()
            },
        )
        """Each kind's handler, placement options and task definition, for the API and the
        reconciler (``vigil.observers.kinds_catalog``): not in their environment, which would
        grow with every kind past Lambda's 4 KB."""

        self.api_function = api.build_api_function(
            self,
            registry=self.table,
            idempotency=self.idempotency_table,
            hosts=self.hosts_table,
            kinds_catalog=self.kinds_catalog,
            pooled=self.pooled_kinds,
            max_observers=self.max_observers,
            heartbeat_seconds=self.heartbeat_seconds,
            legacy=self.legacy_table,
        )
        self.api, self.api_access_logs = api.build_rest_api(
            self, self.api_function, self.log_retention
        )
        self.reconciler = reconciler.build_reconciler(
            self,
            registry=self.table,
            hosts=self.hosts_table,
            cluster=self.cluster,
            task_definitions=self.task_definitions,
            kinds_catalog=self.kinds_catalog,
            network=self.network,
            observers_dlq=self.observers_dlq,
            failures=self.reconciler_failures,
            heartbeat_seconds=self.heartbeat_seconds,
            restarts=reconciler.Restarts(failure_threshold, backoff_base, backoff_cap),
            legacy=self.legacy_table,
        )
        reconciler.grant_reconciler(
            self.reconciler,
            registry=self.table,
            hosts=self.hosts_table,
            pooled=bool(self.pooled_kinds),
            cluster=self.cluster,
            task_definitions=self.task_definitions,
            task_roles=self.task_roles,
            execution_role=self.execution_role,
            observers_dlq=self.observers_dlq,
            legacy=self.legacy_table,
        )
        triggers = reconciler.build_triggers(
            self,
            self.reconciler,
            registry=self.table,
            cluster=self.cluster,
            events_dlq=self.events_dlq,
            stream_dlq=self.stream_dlq,
            legacy=self.legacy_table,
        )
        self.task_events_rule = triggers.task_events
        self.resync_rule = triggers.resync
        self.failed_metric = self.metric(ObserverMetric.FAILED)
        self.alarms = alarms.build_alarms(self)

    STUCK_METRICS = alarms.STUCK_METRICS
    """What each resync counts of the states that can stick (the dashboard plots them too)."""

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
        return alarms.fleet_metric(metric, statistic, period, stage=stage_of(self), kind=kind)

    def metric(
        self, metric: ObserverMetric, statistic: str = "Sum", period: Duration = Duration.minutes(5)
    ) -> cloudwatch.Metric:
        """A fleet-wide metric the reconciler emits."""
        return alarms.fleet_metric(metric, statistic, period, stage=stage_of(self))

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
