"""A host's environment: every variable checked at once, the task ARN from ECS's metadata endpoint
(read with urllib from a local server here), and a bad environment ends the host with exit 2."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from vigil.observers import main
from vigil.observers.host_process.settings import HostSettings
from vigil.settings import SettingsError

ARN = "arn:aws:ecs:us-east-1:123456789012:task/vigil/abc"
ENV = {
    "VIGIL_HOST_ID": "h1",
    "VIGIL_HOSTS_TABLE": "hosts",
    "VIGIL_HOST_SLOTS": "50",
    "VIGIL_REGISTRY_TABLE": "observers",
    "VIGIL_OBSERVER_KINDS": '{"ticker": "observers.ticker.run"}',
    "VIGIL_HEARTBEAT_SECONDS": "30",
}


@pytest.fixture
def metadata() -> Iterator[str]:
    """ECS's task metadata endpoint v4: ``GET $ECS_CONTAINER_METADATA_URI_V4/task``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"TaskARN": ARN, "Family": "vigil"}).encode()
            self.send_response(200 if self.path == "/v4/abc/task" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v4/abc"
    server.shutdown()
    thread.join(timeout=5)


def test_given_ecs_metadata_when_read_then_the_task_arn_comes_from_it(metadata: str) -> None:
    settings = HostSettings.from_env({**ENV, "ECS_CONTAINER_METADATA_URI_V4": metadata})

    assert settings.task_arn == ARN
    assert (settings.host_id, settings.slots, settings.heartbeat_seconds) == ("h1", 50, 30)
    assert settings.stop_timeout_seconds == 10.0


def test_given_an_explicit_task_arn_when_read_then_metadata_is_not_asked() -> None:
    def unreachable(url: str) -> Any:
        raise AssertionError("metadata read")

    settings = HostSettings.from_env(
        {**ENV, "VIGIL_TASK_ARN": ARN, "VIGIL_HOST_STOP_TIMEOUT_SECONDS": "25"}, unreachable
    )

    assert settings.task_arn == ARN and settings.stop_timeout_seconds == 25.0


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ({"Family": "vigil"}, "answered without a TaskARN"),
        ([1, 2], "cannot read the task ARN"),
    ],
)
def test_given_a_metadata_answer_without_an_arn_when_read_then_refused(
    answer: Any, named: str
) -> None:
    with pytest.raises(SettingsError, match=named):
        HostSettings.from_env(
            {**ENV, "ECS_CONTAINER_METADATA_URI_V4": "http://x"}, lambda u: answer
        )


def test_given_several_bad_variables_when_read_then_one_error_names_each() -> None:
    env = {**ENV, "VIGIL_HOST_SLOTS": "0", "VIGIL_HOSTS_TABLE": "", "VIGIL_OBSERVER_KINDS": "[]"}

    with pytest.raises(SettingsError) as raised:
        HostSettings.from_env(env)

    message = str(raised.value)
    for named in (
        "VIGIL_HOSTS_TABLE is required",
        "VIGIL_HOST_SLOTS: must be >= 1",
        "ECS_CONTAINER_METADATA_URI_V4 is required",
        "VIGIL_OBSERVER_KINDS",
    ):
        assert named in message


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"VIGIL_HOST_SLOTS": "x"}, "VIGIL_HOST_SLOTS: must be an integer"),
        ({"VIGIL_HEARTBEAT_SECONDS": ""}, "VIGIL_HEARTBEAT_SECONDS is required"),
        ({"VIGIL_HOST_STOP_TIMEOUT_SECONDS": "-1"}, "VIGIL_HOST_STOP_TIMEOUT_SECONDS"),
        ({"VIGIL_TASK_ARN": ""}, "ECS_CONTAINER_METADATA_URI_V4 is required"),
    ],
)
def test_given_a_bad_host_environment_when_main_runs_then_exit_2_with_a_clear_log(
    overrides: dict[str, str], named: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = {**ENV, "VIGIL_TASK_ARN": ARN, **overrides}

    code = main.main(env)

    assert code == 2
    assert any(
        r.getMessage() == "bad host configuration" and named in str(r.__dict__.get("reason"))
        for r in caplog.records
    ), caplog.text
