"""``vigil local up``'s container processes: a Ctrl-C landing as a process has just been spawned
waits for it to be recorded, so stopping stops it too (nothing left running)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vigil_tools.local import containers
from vigil_tools.local.containers import ContainerProcesses
from vigil_tools.local.interrupts import Interrupts, Stopped

TASK = "arn:aws:ecs:us-east-1:123456789012:task/vigil/1"


class OneTaskEcs:
    """ECS with one RUNNING task (what ``sync`` reads)."""

    def list_tasks(self, *, cluster: str, desiredStatus: str) -> dict[str, list[str]]:
        return {"taskArns": [TASK] if desiredStatus == "RUNNING" else []}


class Session:
    def client(self, _service: str) -> OneTaskEcs:
        return OneTaskEcs()


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every process the containers start; the test's leftovers are killed at its end."""
    started: list[subprocess.Popen[bytes]] = []
    monkeypatch.setattr(containers, "describe_task", lambda *_: {"taskDefinitionArn": "td"})
    monkeypatch.setattr(
        containers,
        "container_environment",
        lambda *_: {"VIGIL_OBSERVER_NAME": "w1", "VIGIL_OBSERVER_GENERATION": "1"},
    )
    monkeypatch.setattr(containers, "_stop_timeout", lambda *_: 5.0)
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_ctrl_c_as_a_process_starts_still_stops_that_process(
    spawned: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    interrupts = Interrupts()
    popen = subprocess.Popen

    def started_then_interrupted(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process = popen(*args, **kwargs)
        spawned.append(process)
        interrupts.on_signal(signal.SIGINT, None)  # Ctrl-C lands right as Popen returns
        return process

    monkeypatch.setattr(containers.subprocess, "Popen", started_then_interrupted)
    processes = ContainerProcesses(
        session=Session(),
        cluster="vigil",
        container="observer",
        command=["python", "-c", "import time; time.sleep(600)"],
        functions=tmp_path,
        endpoint_env={},
        log_dir=tmp_path / "logs",
        deliver=lambda _event: None,
        held=interrupts.held,
    )

    with pytest.raises(Stopped):
        processes.sync()
    processes.stop_all(grace=30)  # what `vigil local up` does on its way out

    (process,) = spawned
    assert interrupts.stop.is_set()
    assert process.poll() == -signal.SIGTERM  # stopped and reaped, not left running
