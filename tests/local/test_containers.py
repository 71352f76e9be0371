"""``vigil local up``'s container processes: a Ctrl-C landing as a process has just been spawned
waits for it to be recorded, so stopping stops it too (nothing left running); stopping a container
kills every process in it, as ECS does, not only its first."""

from __future__ import annotations

import os
import signal
import subprocess
import time
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


# A host that hands its observers over slowly (ignores SIGTERM for longer than the grace) and has
# one child process (an observer, as the pooled host's forkserver children are).
HOST = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *_: None)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
open(sys.argv[1] + ".tmp", "w").write(str(child.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is not running
    except (ProcessLookupError, FileNotFoundError):
        return False


def _until(what: str, check: Any, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.02)


def test_stopping_a_host_leaves_none_of_its_children_running(
    spawned: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    pid_file = tmp_path / "child.pid"
    processes = ContainerProcesses(
        session=Session(),
        cluster="vigil",
        container="observer",
        command=["python", "-c", HOST, str(pid_file)],
        functions=tmp_path,
        endpoint_env={},
        log_dir=tmp_path / "logs",
        deliver=lambda _event: None,
    )
    processes.sync()
    _until("the host's child", pid_file.exists)
    child = int(pid_file.read_text())

    processes.stop_all(grace=0.5)  # what `vigil local up` does on Ctrl-C

    try:
        _until("the host's child to die", lambda: not _alive(child), seconds=5)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
