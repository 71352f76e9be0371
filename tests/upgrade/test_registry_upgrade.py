"""The upgrade of a deployed fleet from the registry keyed by name to the registry keyed by kind,
on the emulator, as an operator does it (docs/guides/deploying.md "Upgrading to the registry keyed
by kind"):

1. main's template (before the change: ``tests/upgrade/name_keyed``) deployed, observers running,
   dedicated and pooled, each counting in its checkpoint;
2. today's app deployed over it with ``-c legacyRegistry=true``: the reconciler copies every
   observer at its first invocation and replays the old containers' writes;
3. the rollout of the new task definitions hands every observer over to the registry keyed by
   kind, fencing its old record;
4. ``vigil observers migrate`` says nothing writes the old table any more, and the deploy without
   the context drops it from the stack.

Checked every 10 s of simulated time from the upgrade's deploy on: no observer is lost (each is
RUNNING, or handed over and RUNNING again), none runs two generations at once (a hand-over stops
the old one first), and no count ever goes back (each checkpoint carried across generations and
tables). The old generation's containers are this checkout's runtime working with the old task
definitions' environment (``tests/helpers/upgrade.py`` says why). Cost: ~13 CPU s (the deploys
~5, the 12 simulated minutes ~8); the app under ``-c legacyRegistry=true`` is synthesized once per
run (~8 CPU s, shared with ``tests/infra/test_stages.py``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.upgrade import name_keyed_app
from vigil.contract.observers import LEGACY_REGISTRY_TABLE_ENV
from vigil.dynamo import from_wire, to_wire
from vigil.observers.registry import Fenced, FencedWrites, RegistryRef
from vigil.observers.registry.layout import Layout
from vigil_tools.api_client import ApiError
from vigil_tools.emulator.template import Synthesized
from vigil_tools.testing.stack import VigilStack

DEDICATED, POOLED = ("d1",), ("p1", "p2")
OBSERVERS = DEDICATED + POOLED
HEARTBEAT = timedelta(seconds=30)
STEP = timedelta(seconds=10)


def running(stack: VigilStack) -> dict[str, set[int]]:
    """The generations whose process runs, per observer: dedicated containers and hosts' children."""
    found: dict[str, set[int]] = {}
    for container in stack.fleet.live():
        found.setdefault(container.name, set()).add(container.generation)
    for host in stack.fleet.live_hosts():
        for name, child in host.children.items():
            if child.alive:
                found.setdefault(name, set()).add(child.generation)
    return found


def count_of(observer: Any) -> int:
    return int((observer.checkpoint or {}).get("count", 0))


def legacy_record(client: Any, table: str, name: str) -> dict[str, Any]:
    item = from_wire(client.get_item(TableName=table, Key=to_wire({"name": name})).get("Item"))
    assert item is not None
    return item


class Watch:
    """What every 5 s step must hold from the upgrade on."""

    def __init__(self, stack: VigilStack, counts: dict[str, int]) -> None:
        self.stack = stack
        self.counts = dict(counts)
        self.overlapping: dict[str, timedelta] = {}
        self.copied = False

    def step(self) -> set[tuple[str, int]]:
        """Ten seconds on; the (status, generation) pairs the observers are in now."""
        self.stack.advance(seconds=STEP.total_seconds())
        generations = running(self.stack)
        self.copied = self.copied or self.stack.migration()["copied_at"] is not None
        if not self.copied:
            # Not copied yet: the new registry is empty; the old containers run on
            assert all(generations.get(name) == {1} for name in OBSERVERS), generations
            return set()
        states = set()
        for name in OBSERVERS:
            observer = self.stack.observer(name)
            assert observer.desired == "RUNNING", name
            assert observer.status in ("RUNNING", "STOPPING", "STARTING"), (name, observer)
            if len(generations.get(name, ())) > 1:
                self.overlapping[name] = self.overlapping.get(name, timedelta()) + STEP
                assert self.overlapping[name] <= HEARTBEAT, (name, generations[name])
            now = count_of(observer)
            assert now >= self.counts[name], (name, now, self.counts[name])
            self.counts[name] = now
            states.add((observer.status, observer.generation))
        return states


def test_a_deployed_fleet_moves_to_the_registry_keyed_by_kind_losing_no_observer(
    old_stack: VigilStack, migrating: Synthesized, synthesized: Synthesized
) -> None:
    stack = old_stack
    # Given main's fleet, each observer RUNNING and counting, on the registry keyed by name
    for name in DEDICATED:
        stack.create_observer(name, "ticker", {"interval_seconds": 20})
    for name in POOLED:
        stack.create_observer(name, "pooled-ticker", {"interval_seconds": 20})
    stack.advance(minutes=2)
    old_table = stack.fleet.fleet.registry_table
    dynamodb = stack.account.session.client("dynamodb")
    assert stack.fleet.fleet.registry.layout is Layout.BY_NAME
    before = {name: stack.observer(name) for name in OBSERVERS}
    assert {(o.status, o.generation) for o in before.values()} == {("RUNNING", 1)}
    tasks = {o["name"]: o["task_arn"] for o in stack.observers()}

    # When today's app is deployed over it, as the upgrade deploys it
    stack.redeploy(migrating)
    assert stack.fleet.fleet.registry.layout is Layout.BY_KIND
    # Until the reconciler has copied the old registry, the API waits (nothing can be created
    # twice meanwhile) and says why
    with pytest.raises(ApiError) as waiting:
        stack.observers()
    assert (waiting.value.status, waiting.value.code) == (503, "registry_migrating")
    assert stack.migration()["copied_at"] is None
    deployed_at = stack.now()

    # Then the first heartbeats after the deploy (replayed from the old table) wake the
    # reconciler, which copies every observer: each still RUNNING at its generation, in the
    # same task, its heartbeats accepted and seen in the new registry
    watch = Watch(stack, {name: count_of(observer) for name, observer in before.items()})
    for _ in range(int(HEARTBEAT / STEP) + 1):
        watch.step()
    status = stack.migration()
    assert status["copied"] == len(OBSERVERS) and status["conflicts"] == []
    assert status["legacy_table"] == old_table
    listed = {o["name"]: o for o in stack.observers()}
    assert sorted(listed) == sorted(OBSERVERS)
    for name, observer in listed.items():
        assert (observer["status"], observer["generation"]) == ("RUNNING", 1)
        assert observer["task_arn"] == tasks[name]
        assert running(stack)[name] == {1}
    for name in DEDICATED:  # a dedicated observer's own heartbeats, written to the old table
        assert datetime.fromisoformat(listed[name]["heartbeat_at"]) > deployed_at
    # (a pooled one's liveness is its host's heartbeat, in the hosts table both versions share)
    assert all(h["heartbeat_age_seconds"] <= HEARTBEAT.total_seconds() for h in stack.hosts())

    # And the rollout hands each over (its kind's max_unavailable at a time), the count going on
    for _ in range(int(timedelta(minutes=8) / STEP)):
        if watch.step() == {("RUNNING", 2)}:
            break
    status = stack.migration()
    assert status["writing_old_registry"] == [] and status["complete"] is True
    for name in OBSERVERS:
        observer = stack.observer(name)
        assert (observer.status, observer.generation) == ("RUNNING", 2), name
        assert running(stack)[name] == {2}
        # The old record is fenced: its generation is the new one's ...
        assert legacy_record(dynamodb, old_table, name)["generation"] == 2
    # ... so a container of the old generation that missed its stop (a zombie) learns at its
    # next write that it was replaced, as any replaced container does
    zombie = FencedWrites(dynamodb, RegistryRef(old_table, Layout.BY_NAME))
    with pytest.raises(Fenced):
        zombie.heartbeat(DEDICATED[0], 1)
    assert all(watch.counts[name] > count_of(before[name]) for name in OBSERVERS)

    # When the next deploy leaves the context out, the old table leaves the stack (retained,
    # with its records) and nothing is lost or restarted
    stack.redeploy(synthesized)
    reconciler = stack.account.session.client("lambda").get_function_configuration(
        FunctionName=stack.fleet.fleet.reconciler
    )
    assert LEGACY_REGISTRY_TABLE_ENV not in reconciler["Environment"]["Variables"]
    for _ in range(int(timedelta(minutes=1) / STEP)):
        assert watch.step() == {("RUNNING", 2)}
    assert legacy_record(dynamodb, old_table, DEDICATED[0])["generation"] == 2
    assert stack.migration()["legacy_table"] is None
    assert watch.overlapping == {}  # a hand-over stops the old generation before the new starts


def test_the_registry_keyed_by_name_stays_as_deployments_made_it(
    tmp_path: Path, synthesized: Synthesized, migrating: Synthesized
) -> None:
    """CloudFormation changes nothing on the old table, with or without the context (no update,
    no replacement), and keeps its stream mapping (in place, filters aside) under it. Cost: ms."""
    old = name_keyed_app(tmp_path / "cdk.out")
    (logical_id,) = [
        i for i, t in old.resources("AWS::DynamoDB::Table").items() if "ObserversRegistry" in i
    ]
    for new in (synthesized, migrating):
        assert new.template["Resources"][logical_id] == old.template["Resources"][logical_id]

    def mapping_of(synth: Synthesized) -> dict[str, Any]:
        found = {
            i: m
            for i, m in synth.resources("AWS::Lambda::EventSourceMapping").items()
            if logical_id in json.dumps(m["Properties"]["EventSourceArn"])
        }
        return found

    (kept,) = mapping_of(old)
    assert list(mapping_of(migrating)) == [kept] and mapping_of(synthesized) == {}
