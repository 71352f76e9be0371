"""What a container really writes to the registry, against the lists its task role is granted.

A kind's task role may UpdateItem only ``CONTAINER_UPDATE_ATTRIBUTES`` of a registry item
(``dynamodb:Attributes``, checked at synth in ``tests/infra/test_pooled_kinds.py``). The lists are
not trusted by hand: the runtime runs here on moto (a dedicated observer claimed, heartbeating,
checkpointing, stopped by the operator or crashing; a pooled child claimed on its host; a host
reporting a child's exit) while every UpdateItem it sends is recorded, and the attributes each one
names, split as IAM sees them, must be in the granted lists. Cost: well under a second.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from tests.helpers.hosts import place
from vigil.clock import ManualClock
from vigil.contract.observers import (
    CONDITION_ONLY,
    CONTAINER_CONDITIONS,
    CONTAINER_UPDATE_ATTRIBUTES,
    CONTAINER_WRITES,
    RECONCILER_OWNED,
    REGISTRY_PARTITION,
    REGISTRY_SORT,
    ExitCode,
)
from vigil.observers.registry import FencedWrites, ObserverRegistry
from vigil.observers.registry.layout import registry_ref
from vigil.observers.runtime import ObserverRuntime, StopReason
from vigil.settings import Environment

from . import sample_kinds
from .test_registry import start_generation
from .test_runtime import looping

KINDS = {
    "sample": "tests.observers.sample_kinds.run",
    "crash": "tests.observers.sample_kinds.crash",
}
_PATH = re.compile(r"(#\w+|[A-Za-z_]\w*)(?:\.(?:#\w+|[A-Za-z_]\w*)|\[\d+\])*")
_FUNCTIONS = {"if_not_exists", "attribute_exists", "attribute_not_exists", "size", "list_append"}
_KEYWORDS = {"SET", "REMOVE", "ADD", "DELETE", "AND", "OR", "NOT", "IN", "BETWEEN"}


@dataclass
class Named:
    """The top-level attributes one UpdateItem names: those it writes (a SET, REMOVE or ADD
    target) and those its condition compares; IAM's ``dynamodb:Attributes`` is their union."""

    written: set[str] = field(default_factory=set)
    compared: set[str] = field(default_factory=set)


def named(request: dict[str, Any]) -> Named:
    names = request.get("ExpressionAttributeNames", {})

    def top(token: str) -> str:
        first = re.split(r"[.\[]", token, maxsplit=1)[0]
        return str(names.get(first, first))

    def attributes(expression: str) -> set[str]:
        found = {m.group(0) for m in _PATH.finditer(re.sub(r":\w+", " ", expression))}
        return {top(t) for t in found if t not in _FUNCTIONS | _KEYWORDS}

    result = Named(compared=attributes(request.get("ConditionExpression", "")))
    for clause in re.split(r"\b(?=SET |REMOVE |ADD |DELETE )", request["UpdateExpression"]):
        verb, _, body = clause.strip().partition(" ")
        for action in filter(None, (a.strip() for a in body.split(","))):
            target = action.split("=")[0] if verb == "SET" else action.split()[0]
            result.written |= attributes(target) if verb else set()
    return result


class Recorder:
    """Keeps every request the containers' client sends (botocore's hook): its operation and
    parameters."""

    def __init__(self, client: Any) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        client.meta.events.register("before-parameter-build.dynamodb.*", self._keep)

    def _keep(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.requests.append((model.name, dict(params)))

    def updates(self) -> list[dict[str, Any]]:
        return [params for operation, params in self.requests if operation == "UpdateItem"]

    def named(self) -> Named:
        every = Named()
        for request in self.updates():
            one = named(request)
            every.written |= one.written
            every.compared |= one.compared
        return every


@pytest.fixture
def container_client(aws: None) -> Any:
    """The containers' own client (the operator's and the reconciler's go through another)."""
    return boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def recorded(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str, container_client: Any
) -> Iterator[Recorder]:
    """The operator creates the observers and the reconciler starts them (not recorded); what
    follows is the containers'."""
    registry.create("obs", "sample", {})
    registry.create("crashing", "crash", {})
    registry.create("early", "sample", {})
    for name in ("obs", "crashing", "early"):
        start_generation(dynamodb, registry_table, name, 1, f"arn:task/{name}")
    registry.request_stop("early")  # the operator stops it before its container claims
    registry.create("child", "sample", {})
    place(dynamodb, registry_table, "child", 2, "ticker_1")
    yield Recorder(container_client)


def container_side(client: Any, table: str, kind: str) -> FencedWrites:
    """What a container of ``kind`` writes through: its task definition names that kind alone."""
    environ = {"VIGIL_REGISTRY_TABLE": table, "VIGIL_OBSERVER_KINDS": json.dumps({kind: "m.f"})}
    return FencedWrites(client, registry_ref(Environment(environ), container=True))


def run(
    registry: FencedWrites,
    clock: ManualClock,
    name: str,
    generation: int,
    *,
    host: str | None = None,
    on_sleep: Callable[[int, ObserverRuntime], None] = lambda n, runtime: None,
) -> ExitCode:
    """Runs the container's runtime; its sleeps advance the clock, act (``on_sleep``), then run
    one heartbeat as the thread would (a pooled child has none: its host beats)."""
    sleeps: list[float] = []

    def sleep(stopping: threading.Event, seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)
        on_sleep(len(sleeps), runtime)
        if host is None:
            runtime.heartbeat_once()

    runtime = ObserverRuntime(
        registry,
        name=name,
        generation=generation,
        kinds=KINDS,
        heartbeat_seconds=10,
        sleeper=sleep,
        heartbeat_thread=False,
        host=host,
    )
    return runtime.run()


def test_every_attribute_a_container_writes_or_compares_is_granted_and_none_it_owns_not(
    recorded: Recorder,
    registry: ObserverRegistry,
    registry_table: str,
    container_client: Any,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sample_kinds, "behaviour", looping)
    sample, crash = (container_side(container_client, registry_table, k) for k in KINDS)
    codes = [
        run(sample, clock, "obs", 1, on_sleep=lambda n, _: stop_at(registry, "obs", n)),
        run(crash, clock, "crashing", 1),
        run(sample, clock, "early", 1),
        run(sample, clock, "child", 2, host="ticker_1", on_sleep=sigterm_at_second),
    ]
    assert codes == [ExitCode.CLEAN, ExitCode.CRASH, ExitCode.CLEAN, ExitCode.CLEAN]
    assert sample.report_host_exit(
        "child", 2, host="ticker_1", exit_code=ExitCode.CLEAN, reason="exited"
    )

    seen = recorded.named()

    # Every kind of container write ran: claims, heartbeats, checkpoints, both exit reports.
    assert {"heartbeat_at_ms", "checkpoint", "last_exit", "host_exit", "status"} <= seen.written
    assert seen.written <= set(CONTAINER_WRITES), seen.written - set(CONTAINER_WRITES)
    assert seen.compared <= set(CONTAINER_CONDITIONS), seen.compared - set(CONTAINER_CONDITIONS)
    assert seen.compared == set(CONTAINER_CONDITIONS)  # the list holds nothing the code left
    keys = {REGISTRY_PARTITION, REGISTRY_SORT}
    assert seen.written | seen.compared | keys <= set(CONTAINER_UPDATE_ATTRIBUTES)
    # No container writes what the operators and the reconciler own ...
    assert not seen.written & set(RECONCILER_OWNED)
    assert not set(CONTAINER_WRITES) & set(RECONCILER_OWNED)
    # ... but IAM cannot tell a compared attribute from a written one: these stay writable (on
    # the kind's own observers: every key is in its own partition, next test).
    assert set(CONTAINER_UPDATE_ATTRIBUTES) & set(RECONCILER_OWNED) - keys == set(CONDITION_ONLY)
    assert set(CONDITION_ONLY) == {"desired", "generation", "host"}


def test_a_container_addresses_only_its_own_kind_s_partition_and_refuses_another_kind_s_record(
    recorded: Recorder,
    registry_table: str,
    container_client: Any,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``dynamodb:LeadingKeys`` holds a kind's role to (moto does not evaluate IAM: the
    template's statements are checked in ``tests/infra/test_kind_roles.py``): every request a
    container makes is a GetItem or UpdateItem whose key is in its own kind's partition, and a
    record of another kind is, to it, no record at all (BAD_CONFIGURATION, nothing written)."""
    monkeypatch.setattr(sample_kinds, "behaviour", looping)
    sample, crash = (container_side(container_client, registry_table, k) for k in KINDS)
    assert run(sample, clock, "obs", 1, on_sleep=lambda n, _: sigterm_at_second(n, _)) == 0
    assert run(crash, clock, "crashing", 1) == ExitCode.CRASH
    assert run(sample, clock, "child", 2, host="ticker_1", on_sleep=sigterm_at_second) == 0
    mine = len(recorded.requests)
    assert run(sample, clock, "crashing", 1) == ExitCode.BAD_CONFIGURATION

    assert {operation for operation, _ in recorded.requests} == {"GetItem", "UpdateItem"}
    kinds_asked = [
        (params["Key"]["kind"]["S"], params["Key"]["name"]["S"]) for _, params in recorded.requests
    ]
    assert {k for k, n in kinds_asked[:mine] if n != "crashing"} == {"sample"}
    assert {k for k, n in kinds_asked[:mine] if n == "crashing"} == {"crash"}
    # The sample container asked about the crash kind's observer: in its own partition only.
    assert kinds_asked[mine:] == [("sample", "crashing")]


def stop_at(registry: ObserverRegistry, name: str, sleeps: int) -> None:
    """The operator stops the observer at the third sleep (its heartbeat then sees it)."""
    if sleeps == 3:
        registry.request_stop(name)


def sigterm_at_second(sleeps: int, runtime: ObserverRuntime) -> None:
    if sleeps == 2:
        runtime.request_stop(StopReason.SIGTERM)
