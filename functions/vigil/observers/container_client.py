"""The DynamoDB client settings of the observer containers: a dedicated task (:mod:`.main`), a pooled
host (:mod:`.host_process.entry`) and each of its children. Their own module, so the host process
and the dedicated entry point share them without importing each other."""

from __future__ import annotations

from botocore.config import Config


def client_config(heartbeat_seconds: float) -> Config:
    """Registry calls short enough that a hanging one cannot outlast the self-fence deadline
    (two intervals): botocore's defaults (60 s reads, retried) would hold a heartbeat for minutes."""
    read_timeout = max(1.0, min(5.0, heartbeat_seconds / 3))
    return Config(
        connect_timeout=2,
        read_timeout=read_timeout,
        retries={"mode": "standard", "max_attempts": 2},
    )
