"""What a container really writes to the registry, against the lists its task role is granted.

A kind's task role may UpdateItem only ``CONTAINER_UPDATE_ATTRIBUTES`` of a registry item
(``dynamodb:Attributes``, checked at synth in ``tests/infra/test_pooled_kinds.py``). The lists are
not trusted by hand: the runtime runs here on moto (a dedicated observer claimed, heartbeating,
checkpointing, stopped by the operator or crashing; a pooled child claimed on its host; a host
reporting a child's exit) while every UpdateItem it sends is recorded, and the attributes each one
names, split as IAM sees them, must be in the granted lists. Cost: well under a second.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.helpers.hosts import place
from vigil.clock import ManualClock
from vigil.contract.observers import (
    CONDITION_ONLY,
    CONTAINER_CONDITIONS,
    CONTAINER_UPDATE_ATTRIBUTES,
    CONTAINER_WRITES,
    RECONCILER_OWNED,
    REGISTRY_KEY,
    ExitCode,
)
from vigil.observers.registry import ObserverRegistry
from vigil.observers.runtime import ObserverRuntime, StopReason

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
    """Keeps the parameters of every UpdateItem the client sends (botocore's hook)."""

    def __init__(self, client: Any) -> None:
        self.requests: list[dict[str, Any]] = []
        client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", self._keep)

    def _keep(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(dict(params))

    def named(self) -> Named:
        every = Named()
        for request in self.requests:
            one = named(request)
            every.written |= one.written
            every.compared |= one.compared
        return every


@pytest.fixture
def recorded(registry: ObserverRegistry, dynamodb: Any, registry_table: str) -> Iterator[Recorder]:
    """The operator creates the observers and the reconciler starts them (not recorded); what
    follows is the container's."""
    registry.create("obs", "sample", {})
    registry.create("crashing", "crash", {})
    registry.create("early", "sample", {})
    for name in ("obs", "crashing", "early"):
        start_generation(dynamodb, registry_table, name, 1, f"arn:task/{name}")
    registry.request_stop("early")  # the operator stops it before its container claims
    registry.create("child", "sample", {})
    place(dynamodb, registry_table, "child", 2, "ticker_1")
    yield Recorder(dynamodb)


def run(
    registry: ObserverRegistry,
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
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sample_kinds, "behaviour", looping)
    codes = [
        run(registry, clock, "obs", 1, on_sleep=lambda n, _: stop_at(registry, "obs", n)),
        run(registry, clock, "crashing", 1),
        run(registry, clock, "early", 1),
        run(registry, clock, "child", 2, host="ticker_1", on_sleep=sigterm_at_second),
    ]
    assert codes == [ExitCode.CLEAN, ExitCode.CRASH, ExitCode.CLEAN, ExitCode.CLEAN]
    assert registry.report_host_exit(
        "child", 2, host="ticker_1", exit_code=ExitCode.CLEAN, reason="exited"
    )

    seen = recorded.named()

    # Every kind of container write ran: claims, heartbeats, checkpoints, both exit reports.
    assert {"heartbeat_at_ms", "checkpoint", "last_exit", "host_exit", "status"} <= seen.written
    assert seen.written <= set(CONTAINER_WRITES), seen.written - set(CONTAINER_WRITES)
    assert seen.compared <= set(CONTAINER_CONDITIONS), seen.compared - set(CONTAINER_CONDITIONS)
    assert seen.compared == set(CONTAINER_CONDITIONS)  # the list holds nothing the code left
    assert seen.written | seen.compared | {REGISTRY_KEY} <= set(CONTAINER_UPDATE_ATTRIBUTES)
    # No container writes what the operators and the reconciler own ...
    assert not seen.written & set(RECONCILER_OWNED)
    assert not set(CONTAINER_WRITES) & set(RECONCILER_OWNED)
    # ... but IAM cannot tell a compared attribute from a written one: these stay writable.
    assert set(CONTAINER_UPDATE_ATTRIBUTES) & set(RECONCILER_OWNED) == set(CONDITION_ONLY)
    assert set(CONDITION_ONLY) == {"desired", "generation", "host"}


def stop_at(registry: ObserverRegistry, name: str, sleeps: int) -> None:
    """The operator stops the observer at the third sleep (its heartbeat then sees it)."""
    if sleeps == 3:
        registry.request_stop(name)


def sigterm_at_second(sleeps: int, runtime: ObserverRuntime) -> None:
    if sleeps == 2:
        runtime.request_stop(StopReason.SIGTERM)
