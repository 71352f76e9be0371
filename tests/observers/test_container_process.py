"""The real entry point in a subprocess against a moto server: SIGTERM, fencing, bad env.

The test polls the registry (bounded deadlines) for the container's heartbeat and checkpoints
before acting, so nothing depends on how fast the subprocess starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.helpers.observers import create_registry_table
from vigil.observers.registry import ObserverRegistry

from .test_registry import raw_item, start_generation

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _one_request_at_a_time(server)
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def _one_request_at_a_time(server: ThreadedMotoServer) -> None:
    """moto applies a request non-atomically (NOTES.md); DynamoDB applies each atomically. The
    container's heartbeat thread and the test write concurrently, so requests take a lock.
    moto offers no hook for this: wrap the WSGI app of its werkzeug server."""
    wsgi = server._server
    assert wsgi is not None
    app = wsgi.app
    lock = threading.Lock()

    def locked(environ: Any, start_response: Any) -> Any:
        with lock:
            return list(app(environ, start_response))

    wsgi.app = locked


@pytest.fixture
def client(endpoint: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")


@pytest.fixture
def table(client: Any, request: pytest.FixtureRequest) -> str:
    name = f"observers-{request.node.name[-40:].replace('[', '-').replace(']', '')}"
    create_registry_table(client, name)
    return name


def spawn(endpoint: str, table: str, name: str, generation: int) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "VIGIL_OBSERVERS_TABLE": table,
        "VIGIL_OBSERVER_NAME": name,
        "VIGIL_OBSERVER_GENERATION": str(generation),
        "VIGIL_OBSERVER_KINDS": '{"ticker": "observers.ticker.run"}',
        "VIGIL_HEARTBEAT_SECONDS": "1",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "vigil.observers.main"],
        cwd=FUNCTIONS,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            pytest.fail(f"container exited early ({process.returncode}):\n{process.stdout.read()}")  # type: ignore[union-attr]
        time.sleep(0.1)
    process.kill()
    pytest.fail(f"condition not met within {DEADLINE_S} s:\n{process.communicate()[0]}")


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
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=DEADLINE_S)

    assert process.returncode == 0, output
    assert time.monotonic() - sent < 5
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
    assert "VIGIL_OBSERVERS_TABLE" in output


def test_given_the_image_dependencies_only_when_importing_the_entry_point_then_it_loads() -> None:
    """The Dockerfile installs boto3 and Powertools, not pydantic or the X-Ray SDK."""
    blocked = "import sys; sys.modules['pydantic'] = None; sys.modules['aws_xray_sdk'] = None; "
    probe = blocked + "import vigil.observers.main, observers.ticker"

    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=FUNCTIONS, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
