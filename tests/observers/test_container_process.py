"""The real entry point in a subprocess against a moto server: SIGTERM, fencing, bad env.

The test polls the registry (bounded deadlines) for the container's heartbeat and checkpoints
before acting, so nothing depends on how fast the subprocess starts.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import boto3
import pytest

from tests.helpers.observers import (
    FUNCTIONS,
    create_registry_table,
    create_ticker_counts_table,
    start_container,
    wait_for,
)
from vigil.observers.registry import ObserverRegistry

from .test_registry import raw_item, start_generation

DEADLINE_S = 20.0


@pytest.fixture
def client(endpoint: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")


@pytest.fixture
def table(client: Any, request: pytest.FixtureRequest) -> str:
    name = f"observers-{request.node.name[-40:].replace('[', '-').replace(']', '')}"
    create_registry_table(client, name)
    create_ticker_counts_table(client)
    return name


def spawn(endpoint: str, table: str, name: str, generation: int) -> subprocess.Popen[str]:
    return start_container(
        endpoint,
        table,
        VIGIL_OBSERVER_NAME=name,
        VIGIL_OBSERVER_GENERATION=str(generation),
    )


def started_ticker(client: Any, table: str) -> ObserverRegistry:
    registry = ObserverRegistry(client, table)
    registry.create("ticker-1", "ticker", {"interval_seconds": 0.2})
    start_generation(client, table, "ticker-1", 1, "arn:aws:ecs:us-east-1:1:task/c/1")
    return registry


def test_given_a_running_container_when_sigterm_arrives_then_exit_0_with_checkpoint_saved(
    endpoint: str, client: Any, table: str
) -> None:
    registry = started_ticker(client, table)
    process = spawn(endpoint, table, "ticker-1", 1)

    def ticking() -> bool:
        observer = registry.get("ticker-1")
        return (
            observer.status.value == "RUNNING" and (observer.checkpoint or {}).get("count", 0) >= 2
        )

    wait_for(ticking, process)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=DEADLINE_S)

    assert process.returncode == 0, output
    observer = registry.get("ticker-1")
    assert (observer.checkpoint or {})["count"] >= 2
    assert observer.last_exit is not None and observer.last_exit.reason == "SIGTERM"
    assert '"tick"' in output and '"count"' in output


def test_given_a_running_container_when_a_new_generation_starts_then_it_exits_3(
    endpoint: str, client: Any, table: str
) -> None:
    registry = started_ticker(client, table)
    process = spawn(endpoint, table, "ticker-1", 1)
    wait_for(lambda: registry.get("ticker-1").heartbeat_at is not None, process)

    start_generation(client, table, "ticker-1", 2, "arn:aws:ecs:us-east-1:1:task/c/2")
    replaced = raw_item(client, table, "ticker-1")
    output, _ = process.communicate(timeout=DEADLINE_S)

    assert process.returncode == 3, output
    assert raw_item(client, table, "ticker-1") == replaced
    assert "fenced" in output


def test_given_a_missing_environment_when_started_then_exit_2(endpoint: str) -> None:
    process = spawn(endpoint, "", "ticker-1", 1)
    output, _ = process.communicate(timeout=DEADLINE_S)

    assert process.returncode == 2, output
    assert "VIGIL_REGISTRY_TABLE" in output


def test_given_the_image_dependencies_only_when_importing_the_entry_point_then_it_loads() -> None:
    """The container needs boto3 and Powertools' core only, not pydantic or the X-Ray SDK."""
    blocked = "import sys; sys.modules['pydantic'] = None; sys.modules['aws_xray_sdk'] = None; "
    probe = blocked + "import vigil.observers.main, observers.ticker"

    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=FUNCTIONS, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
