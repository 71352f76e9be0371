"""Pooled observer hosts: memory per observer slot, and liveness writes pooled against dedicated.

Memory: a real host (``python -m vigil.observers.main`` with ``VIGIL_HOST_ID``) runs K example
tickers (``functions/observers/ticker.py``) against a moto server; once each has checkpointed, the
PSS (``/proc/<pid>/smaps_rollup``) of the host's whole process tree (host, forkserver, children)
is summed. PSS divides shared pages among the processes that share them, so the sum is what the
task really holds. Per slot = (tree at K - the host alone with nothing assigned) / K. A dedicated
container running one ticker is measured the same way, for comparison.

Writes: liveness writes counted on moto over several heartbeat intervals: a pooled host of K=50
(its supervisor stepped with idle fake children) against a dedicated observer's runtime, then
scaled to 10,000 observers. Both modes write the same claims and checkpoints, so only liveness
differs. Write units use the item's size (DynamoDB bills an update by the larger of the item's
old and new size, 1 WRU per KB): the host's item carries K entries in ``assigned`` and
``running``.

``python -m benchmarks.host_memory`` prints the tables; ``run(quick=True)`` skips K=50 memory.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws
from moto.server import ThreadedMotoServer

from tests.helpers.hosts import TASK_ARN, FakeLauncher, assign, host_item, place, put_host
from tests.helpers.moto_fleet import CallCounter
from tests.helpers.observers import (
    HOSTS_TABLE,
    create_hosts_table,
    create_registry_table,
    registry_key,
    start_container,
)
from vigil.clock import ManualClock, system_clock
from vigil.observers.host_process.heartbeat_store import HeartbeatStore
from vigil.observers.host_process.supervisor import HostSupervisor
from vigil.observers.registry import ObserverRegistry
from vigil.observers.runtime import ObserverRuntime
from vigil_tools.emulator.template import synthesized_app

ROOT = Path(__file__).resolve().parent.parent
SLOTS = (1, 10, 50)
QUICK_SLOTS = (1, 10)
FLEET = 10_000
POOLED_K = 50
INTERVALS = 10
TICK_SECONDS = 5.0
DEADLINE_S = 120.0
WRU_PRICE = 0.625  # $ per million write request units, DynamoDB on-demand, us-east-1
MINUTES_PER_MONTH = 30 * 24 * 60
KINDS = {"ticker": "observers.ticker.run"}


def run(quick: bool = False) -> str:
    interval = _heartbeat_seconds()
    memory = _memory_table(QUICK_SLOTS if quick else SLOTS)
    writes = _writes_table(interval)
    return f"{memory}\n\n{writes}"


# -- memory -------------------------------------------------------------------------------------


def _memory_table(sizes: tuple[int, ...]) -> str:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        base = _host_tree_kb(client, endpoint, 0)[0]
        rows = [
            "| Observers on one host (K) | host tree PSS | per slot beyond the host's base |",
            "|---:|---:|---:|",
            f"| 0 (the host alone) | {base / 1024:.1f} MiB | |",
        ]
        for k in sizes:
            total, _ = _host_tree_kb(client, endpoint, k)
            rows.append(f"| {k} | {total / 1024:.1f} MiB | {(total - base) / k / 1024:.1f} MiB |")
        dedicated = _dedicated_kb(client, endpoint)
    finally:
        server.stop()
    rows.append(f"| dedicated container, 1 observer | {dedicated / 1024:.1f} MiB | |")
    return "\n".join(rows)


def _host_tree_kb(client: Any, endpoint: str, k: int) -> tuple[int, int]:
    """(PSS of the host's process tree, its process count) once its K tickers have started."""
    registry_table, hosts_table = _tables(client, f"k{k}")
    names = [f"ticker-{i}" for i in range(k)]
    registry = _tickers(client, registry_table, names)
    put_host(client, hosts_table, "h1", assigned=dict.fromkeys(names, 1))
    process = _container(
        endpoint,
        registry_table,
        VIGIL_HOST_ID="h1",
        VIGIL_TASK_ARN=TASK_ARN,
        VIGIL_HOSTS_TABLE=hosts_table,
        VIGIL_HOST_SLOTS=str(max(k, 1)),
    )
    try:
        _wait(lambda: "heartbeat_at_ms" in host_item(client, hosts_table, "h1"), process)
        _wait(lambda: _all_counted(registry, names, 2), process)
        pids = _tree(process.pid)
        return sum(_pss_kb(pid) for pid in pids), len(pids)
    finally:
        _end(process)


def _dedicated_kb(client: Any, endpoint: str) -> int:
    registry_table, _ = _tables(client, "dedicated")
    registry = _tickers(client, registry_table, ["solo"])
    place(client, registry_table, "solo", 1, host_id=None)
    process = _container(
        endpoint, registry_table, VIGIL_OBSERVER_NAME="solo", VIGIL_OBSERVER_GENERATION="1"
    )
    try:
        _wait(lambda: _all_counted(registry, ["solo"], 2), process)
        return sum(_pss_kb(pid) for pid in _tree(process.pid))
    finally:
        _end(process)


def _tables(client: Any, suffix: str) -> tuple[str, str]:
    registry_table, hosts_table = f"observers-{suffix}", f"hosts-{suffix}"
    create_registry_table(client, registry_table)
    create_hosts_table(client, hosts_table)
    return registry_table, hosts_table


def _tickers(client: Any, table: str, names: list[str]) -> ObserverRegistry:
    registry = ObserverRegistry(client, table)
    for name in names:
        registry.create(name, "ticker", {"interval_seconds": TICK_SECONDS})
        place(client, table, name, 1, "h1")
    return registry


def _container(endpoint: str, table: str, **variables: str) -> subprocess.Popen[str]:
    return start_container(
        endpoint,
        table,
        stdout=subprocess.DEVNULL,
        VIGIL_HEARTBEAT_SECONDS="5",
        VIGIL_OBSERVER_KINDS=json.dumps(KINDS),
        **variables,
    )


def _all_counted(registry: ObserverRegistry, names: list[str], at_least: int) -> bool:
    return all(int((registry.get(n).checkpoint or {}).get("count", 0)) >= at_least for n in names)


def _wait(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the container exited early ({process.returncode})")
        if condition():
            return
        time.sleep(0.5)
    raise RuntimeError(f"not ready within {DEADLINE_S} s")


def _end(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (the forkserver is the host's child, observers its)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in children:
            found += _tree(int(child))
    return found


def _pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise RuntimeError(f"no Pss in /proc/{pid}/smaps_rollup")


# -- writes -------------------------------------------------------------------------------------


def _heartbeat_seconds() -> int:
    """The interval the synthesized app gives its containers (one source of truth)."""
    for resource in synthesized_app().resources("AWS::ECS::TaskDefinition").values():
        for container in resource["Properties"]["ContainerDefinitions"]:
            for variable in container.get("Environment", []):
                if variable["Name"] == "VIGIL_HEARTBEAT_SECONDS":
                    return int(variable["Value"])
    raise RuntimeError("no VIGIL_HEARTBEAT_SECONDS in the synthesized task definitions")


def _writes_table(interval: int) -> str:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_registry_table(client)
        create_hosts_table(client)
        pooled_writes, pooled_size = _pooled(client, interval)
        dedicated_writes, dedicated_size = _dedicated(client)
    per_minute = 60 / interval
    rows = [
        f"Liveness writes at {FLEET:,} observers, heartbeat every {interval} s (the app's), "
        f"counted over {INTERVALS} intervals; $ at {WRU_PRICE} per million WRU (on-demand, "
        "us-east-1, 2025 list price, approximate).",
        "",
        "| Placement | writes per interval (counted) | writes per minute | item size | WRU per "
        "month | $ per month |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, units, per_interval, size in (
        ("dedicated (1 per observer)", FLEET, dedicated_writes, dedicated_size),
        (
            f"pooled, K = {POOLED_K} (1 per host)",
            math.ceil(FLEET / POOLED_K),
            pooled_writes,
            pooled_size,
        ),
    ):
        writes_per_minute = units * per_interval * per_minute
        wru = writes_per_minute * MINUTES_PER_MONTH * math.ceil(size / 1024)
        rows.append(
            f"| {label} | {per_interval:g} per {'observer' if units == FLEET else 'host'} | "
            f"{writes_per_minute:,.0f} | {size:,} B | {wru / 1e6:,.0f} M | "
            f"${wru / 1e6 * WRU_PRICE:,.2f} |"
        )
    return "\n".join(rows)


def _pooled(client: Any, interval: int) -> tuple[float, int]:
    """Heartbeat writes per interval of one host running K observers (fake children)."""
    clock = ManualClock(system_clock())
    names = {f"observer-{i:04d}": 1 for i in range(POOLED_K)}
    put_host(client, HOSTS_TABLE, "h1", slots=POOLED_K)
    assign(client, HOSTS_TABLE, "h1", names)
    supervisor = HostSupervisor(
        HeartbeatStore(client, HOSTS_TABLE, host_id="h1", task_arn=TASK_ARN, clock=clock),
        FakeLauncher(),
        ObserverRegistry(client, "vigil-observers", clock=clock),
        slots=POOLED_K,
        heartbeat_seconds=interval,
    )
    supervisor.tick(0.0)  # first beat: the children start
    counter = CallCounter()
    counter.attach(client)
    for step in range(1, INTERVALS * 4 + 1):  # four steps per interval: only one writes
        clock.advance(interval / 4)
        supervisor.tick(step * interval / 4)
    return counter.calls["UpdateItem"] / INTERVALS, _item_size(host_item(client, HOSTS_TABLE, "h1"))


def _dedicated(client: Any) -> tuple[float, int]:
    """Heartbeat writes per interval of one dedicated observer's runtime."""
    registry = ObserverRegistry(client, "vigil-observers")
    registry.create("solo", "ticker", {"interval_seconds": 5})
    place(client, "vigil-observers", "solo", 1, host_id=None)
    registry.claim_generation("solo", 1)
    registry.checkpoint("solo", 1, {"count": 12345})
    runtime = ObserverRuntime(
        registry,
        name="solo",
        generation=1,
        kinds=KINDS,
        heartbeat_seconds=30,
        heartbeat_thread=False,
    )
    counter = CallCounter()
    counter.attach(client)
    for _ in range(INTERVALS):
        runtime.heartbeat_once()
    item = client.get_item(
        TableName="vigil-observers", Key=registry_key(client, "vigil-observers", "solo")
    )["Item"]
    return counter.calls["UpdateItem"] / INTERVALS, _wire_size(item)


def _item_size(item: dict[str, Any]) -> int:
    from vigil.dynamo import to_wire

    return _wire_size(to_wire(item))


def _wire_size(item: dict[str, Any]) -> int:
    """Approximately DynamoDB's item size: names plus values (numbers ~ digits / 2 + 1 bytes,
    maps and lists 3 bytes plus 1 per element)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return len(inner.lstrip("-").replace(".", "")) // 2 + 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in inner)
    return 1


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
