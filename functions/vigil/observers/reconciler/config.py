"""The reconciler's environment (names as the ObserverFleet construct sets them), read once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from vigil.contract.hosts import HOSTS_TABLE_ENV, PLACEMENTS_ENV
from vigil.contract.observers import LEGACY_REGISTRY_TABLE_ENV
from vigil.observers import decisions as d
from vigil.observers.kind_options import KindOptions, parse_kind_options
from vigil.observers.registry.layout import RegistryRef, registry_ref
from vigil.settings import Environment


@dataclass(frozen=True)
class ReconcilerConfig:
    table: RegistryRef
    cluster_arn: str
    task_definitions: dict[str, str]
    container_name: str
    subnets: list[str]
    security_groups: list[str]
    dlq_url: str
    heartbeat_seconds: int
    assign_public_ip: bool = True
    failure_threshold: int = 5
    backoff_base_seconds: int = 30
    backoff_cap_seconds: int = 900
    start_timeout_seconds: int = 600
    healthy_after_seconds: int = 300
    lease_seconds: int = 300
    kind_options: dict[str, KindOptions] = field(default_factory=dict)
    """Per kind: placement, rollout budget and capacity (a kind not named gets the defaults:
    dedicated, on-demand)."""
    hosts_table: str = ""
    legacy_table: str = ""
    """A name-keyed registry this deployment migrates from (``-c legacyRegistry=true``)."""

    def options(self, kind: str) -> KindOptions:
        return self.kind_options.get(kind, KindOptions())

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ReconcilerConfig:
        """Raises :class:`~vigil.settings.SettingsError` naming the variable at fault."""
        read = Environment(env)
        return cls(
            **read.gather(
                table=lambda: registry_ref(read),
                cluster_arn=lambda: read.text("VIGIL_CLUSTER_ARN"),
                task_definitions=lambda: read.mapping("VIGIL_TASK_DEFINITIONS"),
                container_name=lambda: read.text("VIGIL_CONTAINER_NAME"),
                subnets=lambda: read.items("VIGIL_SUBNETS"),
                security_groups=lambda: read.items("VIGIL_SECURITY_GROUPS"),
                dlq_url=lambda: read.text("VIGIL_OBSERVERS_DLQ_URL"),
                heartbeat_seconds=lambda: read.integer("VIGIL_HEARTBEAT_SECONDS", minimum=5),
                assign_public_ip=lambda: read.flag("VIGIL_ASSIGN_PUBLIC_IP", True),
                failure_threshold=lambda: read.integer(
                    "VIGIL_FAILURE_THRESHOLD", minimum=1, default=5
                ),
                backoff_base_seconds=lambda: read.integer(
                    "VIGIL_BACKOFF_BASE_SECONDS", minimum=1, default=30
                ),
                backoff_cap_seconds=lambda: read.integer(
                    "VIGIL_BACKOFF_CAP_SECONDS", minimum=1, default=900
                ),
                start_timeout_seconds=lambda: read.integer(
                    "VIGIL_START_TIMEOUT_SECONDS", minimum=30, default=600
                ),
                healthy_after_seconds=lambda: read.integer(
                    "VIGIL_HEALTHY_AFTER_SECONDS", minimum=1, default=300
                ),
                lease_seconds=lambda: read.integer(
                    "VIGIL_RESYNC_LEASE_SECONDS", minimum=10, default=300
                ),
                kind_options=lambda: read.parsed(
                    PLACEMENTS_ENV, parse_kind_options, dict[str, KindOptions]()
                ),
                hosts_table=lambda: read.text(HOSTS_TABLE_ENV, ""),
                legacy_table=lambda: read.text(LEGACY_REGISTRY_TABLE_ENV, ""),
            )
        )

    def decision_settings(self) -> d.Settings:
        return d.Settings(
            heartbeat_interval=timedelta(seconds=self.heartbeat_seconds),
            start_timeout=timedelta(seconds=self.start_timeout_seconds),
            healthy_after=timedelta(seconds=self.healthy_after_seconds),
            backoff_base=timedelta(seconds=self.backoff_base_seconds),
            backoff_cap=timedelta(seconds=self.backoff_cap_seconds),
            failure_threshold=self.failure_threshold,
        )
