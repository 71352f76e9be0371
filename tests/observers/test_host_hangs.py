"""A partition where the host's calls hang instead of failing (issue 33, items 1 and 2).

The host runs as ECS runs it (:func:`vigil.observers.host_process.entry.main`: its own clients,
its own run loop, real time) against a DynamoDB endpoint on a real local socket that answers the
first heartbeat and then accepts every connection and never answers. Children are stand-ins whose
sentinels are real pipes, so the host waits on them as on processes. The heartbeat interval is
2 s, so the lease is 2 s and a test lasts a few seconds.

The bound: every child is gone (killed) one interval after the last heartbeat the endpoint
accepted. The host's lease counts from when it sent that beat, which is no later than when the
endpoint received it, so the kill must come at most one interval after that receipt (plus the
scheduling slack of a loaded machine).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError

from tests.helpers.hanging_dynamodb import HangingDynamoDB
from vigil.contract.hosts import HOST_ID_ENV, HOST_SLOTS_ENV, HOSTS_TABLE_ENV, TASK_ARN_ENV
from vigil.contract.observers import ExitCode
from vigil.observers.container_client import (
    CONTAINER_ATTEMPTS,
    client_config,
    host_client_config,
    host_timeouts,
)
from vigil.observers.host_process import entry

INTERVAL_S = 2
SLACK_S = 1.0
"""What a loaded 2-core machine may add to a deadline the host meets on time."""
HOSTS = "hosts"


class PipeChild:
    """A child process's stand-in: it runs until it ends or is killed; its sentinel is a pipe
    that becomes readable when it ends. Signals are recorded with the time they arrived."""

    def __init__(self, name: str, generation: int, exitcode: int | None = None) -> None:
        self.name = name
        self.generation = generation
        self.exitcode: int | None = None
        self.signals: list[tuple[str, float]] = []
        self._read, self._write = os.pipe()
        if exitcode is not None:
            self.end(exitcode)

    @property
    def sentinel(self) -> int:
        return self._read

    def end(self, exitcode: int) -> None:
        self.exitcode = exitcode
        if self._write >= 0:
            os.close(self._write)
            self._write = -1

    def stop(self) -> None:
        self.signals.append(("TERM", time.monotonic()))

    def fence(self) -> None:
        self.signals.append(("USR1", time.monotonic()))

    def kill(self) -> None:
        self.signals.append(("KILL", time.monotonic()))
        self.end(-9)

    def killed_at(self) -> float:
        return next(at for name, at in self.signals if name == "KILL")


class Launcher:
    """Starts stand-ins; those named in ``crashing`` have exited (code 1) by the next step."""

    def __init__(self, crashing: set[str]) -> None:
        self.crashing = crashing
        self.started: list[PipeChild] = []

    def start(self, name: str, generation: int) -> PipeChild:
        child = PipeChild(name, generation, 1 if name in self.crashing else None)
        self.started.append(child)
        return child


class Endpoint:
    """Answers the host's first heartbeat (assigning ``names`` at generation 1), then hangs."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.accepted_at: float | None = None
        """When the endpoint received the one heartbeat it accepted (monotonic)."""
        self.server = HangingDynamoDB(self.answer)

    def answer(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        assert operation == "UpdateItem" and request["TableName"] == HOSTS, request
        self.accepted_at = time.monotonic()
        self.server.hang = True  # the partition: nothing after this beat is answered
        assigned = {name: {"N": "1"} for name in self.names}
        return {"Attributes": {"status": {"S": "RUNNING"}, "assigned": {"M": assigned}}}


@pytest.fixture
def signals_restored() -> Iterator[None]:
    """The entry point installs SIGTERM/SIGINT handlers and a wake-up fd: put them back."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    signal.set_wakeup_fd(-1)
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def run_host(
    monkeypatch: pytest.MonkeyPatch, endpoint: Endpoint, launcher: Launcher
) -> tuple[int, float]:
    """The host's entry point until it exits; (its exit code, its wall time)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint.server.url)
    environ = {
        HOST_ID_ENV: "h1",
        HOSTS_TABLE_ENV: HOSTS,
        HOST_SLOTS_ENV: "10",
        TASK_ARN_ENV: "arn:aws:ecs:us-east-1:123456789012:task/vigil/h1",
        "VIGIL_OBSERVERS_TABLE": "observers",
        "VIGIL_OBSERVER_KINDS": '{"ticker": "observers.ticker.run"}',
        "VIGIL_HEARTBEAT_SECONDS": str(INTERVAL_S),
    }
    started = time.monotonic()
    try:
        code = entry.main(environ, launcher=launcher)
    finally:
        endpoint.server.close()
    return code, time.monotonic() - started


@pytest.mark.parametrize("crashed_at_the_cut", [0, 6])
def test_given_calls_that_hang_when_the_lease_runs_out_then_children_are_gone_within_it(
    monkeypatch: pytest.MonkeyPatch, signals_restored: None, crashed_at_the_cut: int
) -> None:
    # Given 8 children assigned by the one beat the endpoint answers, of which
    # ``crashed_at_the_cut`` exit at once: their exit reports are pending when calls start to hang
    names = [f"obs-{i}" for i in range(8)]
    crashing = set(names[:crashed_at_the_cut])
    endpoint = Endpoint(names)
    launcher = Launcher(crashing)

    # When every later call hangs
    code, _ = run_host(monkeypatch, endpoint, launcher)

    # Then the host fenced itself and every running child was killed within one interval of
    # the accepted beat
    assert code == ExitCode.FENCED
    assert endpoint.accepted_at is not None
    running = [c for c in launcher.started if c.name not in crashing]
    assert len(running) == 8 - crashed_at_the_cut
    late = {c.name: round(c.killed_at() - endpoint.accepted_at, 2) for c in running}
    assert max(late.values()) <= INTERVAL_S + SLACK_S, late
    assert all([s for s, _ in c.signals] == ["USR1", "KILL"] for c in running)


def test_the_hosts_client_makes_one_attempt_per_call_and_gives_up_within_its_timeouts() -> None:
    # botocore's client setting max_attempts counts retries (2 made three tries, 17 s of one
    # exit report at 30 s heartbeats); the host's own client makes one try per call, its retries
    # being the supervisor's, within its lease
    server = HangingDynamoDB(lambda operation, request: {})
    server.hang = True
    timeouts = host_timeouts(INTERVAL_S)
    client = boto3.client(
        "dynamodb", endpoint_url=server.url, config=host_client_config(INTERVAL_S)
    )
    started = time.monotonic()
    try:
        with pytest.raises(ReadTimeoutError):
            client.describe_limits()
        took = time.monotonic() - started
    finally:
        server.close()

    assert server.connections == 1
    assert timeouts.read <= took <= timeouts.attempt + SLACK_S
    # the containers' clients: three tries, as their bound says
    containers = boto3.client("dynamodb", config=client_config(30))
    assert containers.meta.config.retries["total_max_attempts"] == CONTAINER_ATTEMPTS == 3


def test_given_the_host_itself_fails_then_its_children_are_killed_and_it_exits_1(
    monkeypatch: pytest.MonkeyPatch, signals_restored: None
) -> None:
    # A host that dies of an error must not leave its children running unsupervised: here its
    # second heartbeat's answer is malformed (no status), which the host cannot read
    answers = iter(
        [
            {"Attributes": {"status": {"S": "RUNNING"}, "assigned": {"M": {"a": {"N": "1"}}}}},
            {"Attributes": {}},
        ]
    )
    endpoint = Endpoint(["a"])
    endpoint.server._answer = lambda operation, request: next(answers)
    launcher = Launcher(set())

    code, _ = run_host(monkeypatch, endpoint, launcher)

    assert code == ExitCode.CRASH  # not FENCED: it did not wait for its lease to run out
    assert [s for s, _ in launcher.started[0].signals] == ["KILL"]
