"""``vigil local up`` in a subprocess on a free port: driven through the ``vigil`` CLI and botocore
with ``endpoint_url``, then stopped with SIGINT, leaving no process behind."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from vigil_tools.cli import main as vigil
from vigil_tools.emulator.template import Synthesized
from vigil_tools.local.up import READY

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 90
"""Deploying the stack on the server (the template is already synthesized)."""
SPEED = "30"
"""Fast enough for a cleanup tick within 10 s (the one schedule a test waits for). Faster costs
CPU for nothing: each simulated minute's resync runs the reconciler (at x120, twice a second)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(what: str, check: Callable[[], Any], seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"waited {seconds} s for {what}")


def _processes() -> dict[int, dict[str, str]]:
    """pid -> its parent, session and command line, from /proc."""
    found: dict[int, dict[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        found[int(entry.name)] = {
            "state": fields[0],
            "ppid": fields[1],
            "session": fields[3],
            "cmd": command,
        }
    return found


class Up:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def exports(self) -> dict[str, str]:
        _wait_for(
            "ready", lambda: READY in self.lines or self.process.poll() is not None, STARTUP_SECONDS
        )
        assert READY in self.lines, f"vigil local up ended early: {self.lines}"
        pairs = (
            line.removeprefix("export ").split("=", 1)
            for line in self.lines
            if line.startswith("export ")
        )
        return {name: shlex.split(value)[0] for name, value in pairs}  # as a shell reads it


@pytest.fixture
def up(synthesized: Synthesized, tmp_path: Path) -> Iterator[Up]:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vigil_tools.cli",
            "local",
            "up",
            "--port",
            str(port),
            "--speed",
            SPEED,
            "--quiet",
            "--cdk-out",
            str(synthesized.outdir),
            "--project",
            str(ROOT),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT}"},
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("w"),
        text=True,
    )
    try:
        yield Up(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_local_up_serves_the_stack_to_both_clis_and_stops_cleanly(
    up: Up, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = up.exports()
    assert set(env) >= {"AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "VIGIL_API_URL"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def cli(*argv: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        code = vigil(["--json", *argv], stdout=out, stderr=err)
        assert code == 0, err.getvalue()
        return out.getvalue()

    # the vigil CLI: the management API, served on the endpoint, through the deployed functions
    assert json.loads(cli("observers", "kinds")) == ["pooled-ticker", "ticker"]
    created = json.loads(
        cli("observers", "create", "w1", "--kind", "ticker", "--config", '{"interval_seconds": 1}')
    )
    assert created["status"] == "PENDING"

    # botocore with endpoint_url, as `aws --endpoint-url` does: the reconciler ran the task,
    # the container (a real process) claimed it and checkpoints
    endpoint = env["AWS_ENDPOINT_URL"]
    session = boto3.Session(region_name=env["AWS_DEFAULT_REGION"])
    dynamodb = session.client("dynamodb", endpoint_url=endpoint)
    registry = next(t for t in dynamodb.list_tables()["TableNames"] if "ObserversKindRegistry" in t)

    def running() -> Any:
        items = dynamodb.scan(TableName=registry)["Items"]
        return [i for i in items if i.get("status", {}).get("S") == "RUNNING" and "checkpoint" in i]

    (item,) = _wait_for("w1 RUNNING with a checkpoint", running)
    assert item["name"]["S"] == "w1"
    ecs = session.client("ecs", endpoint_url=endpoint)
    (cluster,) = ecs.list_clusters()["clusterArns"]
    assert len(ecs.list_tasks(cluster=cluster, desiredStatus="RUNNING")["taskArns"]) == 1
    containers = [
        pid
        for pid, p in _processes().items()
        if p["ppid"] == str(up.process.pid) and "vigil.observers.main" in p["cmd"]
    ]
    assert len(containers) == 1

    # the schedules fire (cleanup every 5 minutes, at x30: every 10 s)
    history = _wait_for(
        "a cleanup tick", lambda: json.loads(cli("observers", "get", "w1")) and _ticks(cli)
    )
    assert history[0]["status"] == "SUCCEEDED"
    sqs = session.client("sqs", endpoint_url=endpoint)
    queue = next(u for u in sqs.list_queues()["QueueUrls"] if "CleanupFailedRuns" in u)
    assert sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0).get("Messages", []) == []

    # the tasks' queues are served: an application here enqueues with the exported catalog (the
    # vigil CLI does it as an application would) and the loop delivers it to the task's function
    if "VIGIL_TASKS_CATALOG" in env:
        order = '{"order": "o-1", "email": "ann@example.com"}'
        task_id = cli("tasks", "enqueue", "send-receipt", "--payload", order, "--key", "o-1")
        record = _wait_for(
            "the receipt task SUCCEEDED",
            lambda: _succeeded(json.loads(cli("tasks", "get", "send-receipt", task_id.strip()))),
        )
        assert record["attempts"] == 1

    up.process.send_signal(signal.SIGINT)
    assert up.process.wait(timeout=30) == 0
    assert up.lines[-1] == "vigil local up: stopped, nothing left running"
    left = {
        pid: p
        for pid, p in _processes().items()
        if p["state"] != "Z"
        and (
            pid in containers
            or p["session"] in {str(c) for c in containers}
            or p["ppid"] == str(up.process.pid)
        )
    }
    assert left == {}


def _succeeded(record: dict[str, Any]) -> dict[str, Any] | None:
    return record if record["status"] == "SUCCEEDED" else None


def _started(up: Up, monkeypatch: pytest.MonkeyPatch, kinds: dict[str, str]) -> list[int]:
    """Observers ``name -> kind`` created through the vigil CLI, once all are RUNNING: the pids of
    the container processes `vigil local up` runs for them."""
    for name, value in up.exports().items():
        monkeypatch.setenv(name, value)
    for name, kind in kinds.items():
        out, err = io.StringIO(), io.StringIO()
        config = '{"interval_seconds": 1}'
        argv = ["--json", "observers", "create", name, "--kind", kind, "--config", config]
        assert vigil(argv, stdout=out, stderr=err) == 0, err.getvalue()

    def status(name: str) -> Any:
        out = io.StringIO()
        vigil(["--json", "observers", "get", name], stdout=out, stderr=io.StringIO())
        return json.loads(out.getvalue()).get("status")

    for name in kinds:
        _wait_for(f"{name} RUNNING", lambda name=name: status(name) == "RUNNING", 90)
    return [
        pid
        for pid, p in _processes().items()
        if p["ppid"] == str(up.process.pid) and "vigil.observers" in p["cmd"]
    ]


def _left(containers: list[int]) -> dict[int, dict[str, str]]:
    """What is still running of the containers: their processes and their sessions'."""
    return {
        pid: p
        for pid, p in _processes().items()
        if p["state"] != "Z" and (pid in containers or p["session"] in {str(c) for c in containers})
    }


def test_a_pooled_observer_runs_and_closing_the_terminal_leaves_no_container_running(
    up: Up, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a pooled host reads its task ARN from ECS's task metadata endpoint, which local up serves
    containers = _started(up, monkeypatch, {"w1": "ticker", "p1": "pooled-ticker"})
    assert len(containers) == 2  # the ticker's container and one host: no host after host

    up.process.send_signal(signal.SIGHUP)  # the terminal `make up` runs in is closed
    assert up.process.wait(timeout=60) == 0

    left = _left(containers)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == {}


def _ticks(cli: Callable[..., str]) -> list[dict[str, Any]]:
    out = io.StringIO()
    code = vigil(["jobs", "history", "cleanup"], stdout=out, stderr=io.StringIO())
    assert code == 0
    rows = out.getvalue().splitlines()[1:]
    return [{"tick": r.split()[0], "status": r.split()[1]} for r in rows if r.strip()]


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = io.StringIO()
        code = vigil(["local", "up", "--port", str(port), "--project", str(ROOT)], stderr=err)
    assert code == 2
    assert err.getvalue() == (
        f"error: port {port} on 127.0.0.1 is in use (another `vigil local up`?): "
        "stop it or pick another with --port\n"
    )


def test_a_speed_that_is_not_positive_is_refused() -> None:
    err = io.StringIO()
    assert vigil(["local", "up", "--speed", "0"], stderr=err) == 2
    assert err.getvalue() == "error: --speed must be positive\n"


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_refused_with_a_message(port: str) -> None:
    err = io.StringIO()
    assert vigil(["local", "up", "--port", port, "--project", str(ROOT)], stderr=err) == 2
    assert err.getvalue() == f"error: --port must be between 0 and 65535, not {port}\n"


@pytest.mark.parametrize("speed", ["nan", "inf"])
def test_a_speed_that_is_not_a_finite_number_is_refused_with_a_message(speed: str) -> None:
    err = io.StringIO()
    assert vigil(["local", "up", "--speed", speed, "--port", "0"], stderr=err) == 2
    assert err.getvalue() == f"error: --speed must be a finite positive number, not {speed}\n"


def test_a_missing_cdk_out_folder_is_refused_with_a_message(tmp_path: Path) -> None:
    missing = tmp_path / "cdk.out"
    err = io.StringIO()
    assert vigil(["local", "up", "--port", "0", "--cdk-out", str(missing)], stderr=err) == 2
    assert err.getvalue() == (
        f"error: --cdk-out {missing}: no such folder (synthesize with `cdk synth -o DIR`)\n"
    )
