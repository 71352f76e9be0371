"""The container runtime in-process: claims, stop requests, fencing, crashes, exit reports.

Heartbeats are driven by the tests (through the injected sleeper) rather than by the thread, so
every interleaving is chosen, not raced; one test runs the real thread to show the hard exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, NoRegionError

from vigil.clock import ManualClock
from vigil.observers import decisions as d
from vigil.observers import main
from vigil.observers.fleet_store import FleetStore
from vigil.observers.model import Desired, Status
from vigil.observers.registry import Fenced, ObserverRegistry
from vigil.observers.runtime import (
    ExitCode,
    ObserverContext,
    ObserverRuntime,
    RuntimeSettings,
    StopReason,
)
from vigil.settings import SettingsError

from . import sample_kinds
from .conftest import StoredObserver

KINDS = {
    "sample": "tests.observers.sample_kinds.run",
    "crash": "tests.observers.sample_kinds.crash",
    "ticker": "observers.ticker.run",
    "broken": "tests.observers.no_such_module.run",
}


class Harness:
    """A runtime whose sleeps advance the manual clock and then run one heartbeat."""

    def __init__(self, registry: ObserverRegistry, clock: ManualClock, generation: int) -> None:
        self.clock = clock
        self.sleeps: list[float] = []
        self.before_beat: Callable[[int], None] = lambda n: None
        self.runtime = ObserverRuntime(
            registry,
            name="obs",
            generation=generation,
            kinds=KINDS,
            heartbeat_seconds=10,
            sleeper=self._sleep,
            heartbeat_thread=False,
        )

    def _sleep(self, stopping: threading.Event, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.advance(seconds)
        self.before_beat(len(self.sleeps))
        self.runtime.heartbeat_once()


@pytest.fixture
def started(registry: ObserverRegistry, stored: StoredObserver) -> ObserverRegistry:
    """An observer the reconciler has just started as generation 1."""
    registry.create("obs", "sample", {"interval_seconds": 10})
    stored.start(1)
    return registry


def install(monkeypatch: pytest.MonkeyPatch, behaviour: Callable[[Any], None]) -> None:
    monkeypatch.setattr(sample_kinds, "behaviour", behaviour)


def looping(ctx: ObserverContext) -> None:
    count = 0
    while not ctx.stopping:
        count += 1
        ctx.checkpoint({"count": count})
        ctx.sleep(10)


def test_given_a_running_observer_when_stop_is_requested_then_it_stops_cleanly_and_reports(
    started: ObserverRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, looping)
    harness = Harness(started, clock, generation=1)
    harness.before_beat = lambda n: started.request_stop("obs") if n == 3 else None

    code = harness.runtime.run()

    observer = started.get("obs")
    assert code is ExitCode.CLEAN
    assert harness.runtime.stop_reason is StopReason.STOP_REQUESTED
    assert observer.status is Status.STOPPED and observer.checkpoint == {"count": 3}
    assert observer.last_exit is not None and observer.last_exit.exit_code == 0
    assert observer.last_exit.reason == "stop requested"
    assert observer.last_exit.task_arn == "arn:task/1"
    assert observer.heartbeat_at == clock()


def test_given_a_replacement_when_the_next_heartbeat_runs_then_fenced_and_nothing_written(
    started: ObserverRegistry,
    clock: ManualClock,
    stored: StoredObserver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, looping)
    harness = Harness(started, clock, generation=1)
    replaced: dict[str, Any] = {}

    def replace(n: int) -> None:
        if n == 2:
            stored.start(2)
            replaced.update(stored.raw())

    harness.before_beat = replace

    code = harness.runtime.run()

    assert code is ExitCode.FENCED
    assert len(harness.sleeps) == 2  # stopped at the first heartbeat after the replacement
    assert stored.raw() == replaced


def test_given_a_replacement_when_the_observer_checkpoints_then_fenced_at_once(
    started: ObserverRegistry,
    clock: ManualClock,
    stored: StoredObserver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []

    def replaced_mid_work(ctx: ObserverContext) -> None:
        ctx.checkpoint({"count": 1})
        stored.start(2)
        try:
            ctx.checkpoint({"count": 2})
        finally:
            seen.append(ctx.stopping)

    install(monkeypatch, replaced_mid_work)

    code = Harness(started, clock, generation=1).runtime.run()

    assert code is ExitCode.FENCED and seen == [True]
    observer = started.get("obs")
    assert observer.checkpoint == {"count": 1} and observer.last_exit is None


def test_given_observer_code_that_raises_when_run_then_crash_exit_and_reason_recorded(
    stored: StoredObserver, registry: ObserverRegistry, clock: ManualClock
) -> None:
    registry.create("obs", "crash", {})
    stored.start(1)

    code = Harness(registry, clock, generation=1).runtime.run()

    observer = registry.get("obs")
    assert code is ExitCode.CRASH
    assert observer.last_exit is not None and observer.last_exit.exit_code == 1
    assert observer.last_exit.reason == "RuntimeError: feed closed unexpectedly"
    assert observer.checkpoint == {"step": 1} and observer.status is Status.RUNNING


def test_given_sigterm_when_running_then_loop_ends_checkpoint_kept_and_status_left_to_reconciler(
    started: ObserverRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = Harness(started, clock, generation=1)
    harness.before_beat = lambda n: harness.runtime.request_stop(StopReason.SIGTERM)
    install(monkeypatch, looping)

    code = harness.runtime.run()

    observer = started.get("obs")
    assert code is ExitCode.CLEAN and observer.checkpoint == {"count": 1}
    assert observer.last_exit is not None and observer.last_exit.reason == "SIGTERM"
    assert observer.status is Status.RUNNING  # the reconciler decides what a SIGTERM means


def test_given_a_previous_checkpoint_when_the_ticker_restarts_then_it_counts_on(
    stored: StoredObserver, registry: ObserverRegistry, clock: ManualClock
) -> None:
    registry.create("obs", "ticker", {"interval_seconds": 1})
    stored.start(1)
    registry.checkpoint("obs", 1, {"count": 41})
    stored.start(2)
    harness = Harness(registry, clock, generation=2)
    harness.before_beat = lambda n: registry.request_stop("obs") if n == 2 else None

    code = harness.runtime.run()

    assert code is ExitCode.CLEAN and registry.get("obs").checkpoint == {"count": 43}
    assert harness.sleeps == [1.0, 1.0]


@pytest.mark.parametrize(
    ("kind", "generation", "expected"),
    [("broken", 1, ExitCode.BAD_CONFIGURATION), ("sample", 7, ExitCode.FENCED)],
)
def test_given_a_bad_kind_or_an_old_generation_when_started_then_it_never_claims(
    stored: StoredObserver,
    registry: ObserverRegistry,
    clock: ManualClock,
    kind: str,
    generation: int,
    expected: ExitCode,
) -> None:
    registry.create("obs", kind, {})
    stored.start(1)

    code = Harness(registry, clock, generation=generation).runtime.run()

    assert code is expected
    assert registry.get("obs").status is Status.STARTING


def test_given_a_failed_observer_when_its_late_container_starts_then_fenced_without_writing(
    started: ObserverRegistry,
    clock: ManualClock,
    stored: StoredObserver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, lambda ctx: pytest.fail("must not run"))
    stored.set_status("FAILED")  # never claimed in the start timeout
    before = stored.raw()

    code = Harness(started, clock, generation=1).runtime.run()

    assert code is ExitCode.FENCED
    assert stored.raw() == before


def test_given_sigterm_before_the_claim_when_started_then_it_never_claims_nor_writes(
    started: ObserverRegistry,
    clock: ManualClock,
    stored: StoredObserver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, lambda ctx: pytest.fail("must not run"))
    before = stored.raw()
    runtime = Harness(started, clock, generation=1).runtime
    runtime.request_stop(StopReason.SIGTERM)

    code = runtime.run()

    assert code is ExitCode.CLEAN
    assert stored.raw() == before


def test_given_an_unknown_observer_when_started_then_bad_configuration(
    registry: ObserverRegistry, clock: ManualClock
) -> None:
    assert Harness(registry, clock, generation=1).runtime.run() is ExitCode.BAD_CONFIGURATION


def test_a_container_of_one_kind_refuses_an_observer_of_another(
    started: ObserverRegistry,
    clock: ManualClock,
    stored: StoredObserver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each kind's task definition lists its own kind only (``VIGIL_OBSERVER_KINDS``): a record of
    another kind is never run under this kind's task role, nor claimed."""
    install(monkeypatch, lambda ctx: pytest.fail("must not run"))
    before = stored.raw()  # of the kind "sample"
    runtime = ObserverRuntime(
        started,
        name="obs",
        generation=1,
        kinds={"ticker": KINDS["ticker"]},
        heartbeat_seconds=10,
        heartbeat_thread=False,
    )

    assert runtime.run() is ExitCode.BAD_CONFIGURATION
    assert stored.raw() == before


def test_given_a_stop_before_the_claim_when_started_then_clean_stop_without_running(
    started: ObserverRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, lambda ctx: pytest.fail("must not run"))
    started.request_stop("obs")

    code = Harness(started, clock, generation=1).runtime.run()

    assert code is ExitCode.CLEAN and started.get("obs").status is Status.STOPPED


def test_given_a_registry_that_stops_answering_when_two_intervals_pass_then_self_fenced(
    started: ObserverRegistry, clock: ManualClock
) -> None:
    started.claim_generation("obs", 1)
    now = [0.0]

    class Unreachable(ObserverRegistry):
        def heartbeat(self, name: str, generation: int) -> Any:
            raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, "UpdateItem")

    runtime = ObserverRuntime(
        Unreachable(started._client, started._table, clock=clock),
        name="obs",
        generation=1,
        kinds=KINDS,
        heartbeat_seconds=10,
        monotonic=lambda: now[0],
        heartbeat_thread=False,
    )

    now[0] = 10.0
    runtime.heartbeat_once()
    assert not runtime.stopping
    now[0] = 20.0
    runtime.heartbeat_once()
    assert runtime.stopping and runtime.stop_reason is StopReason.FENCED


def test_given_fenced_code_that_ignores_stopping_when_the_grace_ends_then_hard_exit(
    aws: None,
    registry_table: str,
    dynamodb: Any,
    stored: StoredObserver,
    serialized: Any,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = ObserverRegistry(serialized(dynamodb), registry_table, clock=clock)
    registry.create("obs", "sample", {})
    stored.start(1)
    released = threading.Event()
    exits: list[int] = []

    def stubborn(ctx: ObserverContext) -> None:
        stored.start(2)
        released.wait(timeout=10)  # blocked in some call that never looks at ctx.stopping

    def hard_exit(code: int) -> None:
        exits.append(code)
        released.set()

    install(monkeypatch, stubborn)
    runtime = ObserverRuntime(
        registry,
        name="obs",
        generation=1,
        kinds=KINDS,
        heartbeat_seconds=0.05,
        hard_exit=hard_exit,
        fence_grace_seconds=0.05,
    )

    assert runtime.run() is ExitCode.FENCED
    assert exits == [ExitCode.FENCED]


def test_given_the_container_environment_when_read_then_validated_once() -> None:
    env = {
        "VIGIL_REGISTRY_TABLE": "t",
        "VIGIL_OBSERVER_NAME": "btc",
        "VIGIL_OBSERVER_GENERATION": "3",
        "VIGIL_OBSERVER_KINDS": '{"ticker": "observers.ticker.run"}',
        "VIGIL_HEARTBEAT_SECONDS": "15",
    }
    settings = RuntimeSettings.from_env(env)
    assert (settings.name, settings.generation, settings.heartbeat_seconds) == ("btc", 3, 15)

    for key, value in [
        ("VIGIL_OBSERVER_GENERATION", "x"),
        ("VIGIL_OBSERVER_GENERATION", "0"),
        ("VIGIL_OBSERVER_NAME", "Bad Name"),
        ("VIGIL_OBSERVER_KINDS", "[]"),
        ("VIGIL_REGISTRY_TABLE", ""),
        ("VIGIL_HEARTBEAT_SECONDS", ""),
        ("VIGIL_HEARTBEAT_SECONDS", "0"),
    ]:
        with pytest.raises(SettingsError, match=key):
            RuntimeSettings.from_env({**env, key: value})


def test_given_a_fenced_runtime_when_checkpointing_again_then_refused_without_a_write(
    started: ObserverRegistry, clock: ManualClock
) -> None:
    runtime = Harness(started, clock, generation=1).runtime
    runtime.request_stop(StopReason.FENCED)

    with pytest.raises(Fenced):
        runtime.save_checkpoint({"count": 9})
    assert started.get("obs").checkpoint is None


class Hanging(ObserverRegistry):
    """A registry whose heartbeat blocks (a DynamoDB call that hangs) until released."""

    def __init__(self, registry: ObserverRegistry) -> None:
        super().__init__(registry._client, registry._table, clock=registry._clock)
        self.entered = threading.Event()
        self.released = threading.Event()

    def heartbeat(self, name: str, generation: int) -> Any:
        self.entered.set()
        self.released.wait(timeout=30)
        raise ClientError({"Error": {"Code": "RequestTimeout"}}, "UpdateItem")


def test_given_a_hanging_heartbeat_when_two_intervals_pass_then_ctx_stopping_self_fences(
    started: ObserverRegistry,
    stored: StoredObserver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    interval = 1 / 64  # the real heartbeat thread enters its (hanging) call after this
    step = 1 / 256  # injected clock: each round of work takes this long
    now = [0.0]
    hanging = Hanging(started)
    seen: list[float] = []

    def work(ctx: ObserverContext) -> None:
        assert hanging.entered.wait(timeout=10)  # the heartbeat thread is stuck in its call
        while not ctx.stopping:
            seen.append(now[0])
            now[0] += step

    install(monkeypatch, work)
    exits: list[int] = []
    runtime = ObserverRuntime(
        hanging,
        name="obs",
        generation=1,
        kinds=KINDS,
        heartbeat_seconds=interval,
        monotonic=lambda: now[0],
        hard_exit=exits.append,
        fence_grace_seconds=0.01,
    )
    try:
        code = runtime.run()  # returns although the heartbeat thread is still blocked
        written = stored.raw()
    finally:
        hanging.released.set()

    assert code is ExitCode.FENCED and runtime.stop_reason is StopReason.FENCED
    assert seen == [i * step for i in range(8)]  # fenced at 2 intervals of silence
    assert written["status"] == "RUNNING" and "last_exit" not in written  # no exit report
    assert exits == []


def sleeping_on(
    registry: ObserverRegistry,
    sleeper: Callable[[threading.Event, float], None],
    now: list[float],
) -> ObserverRuntime:
    """``obs``'s runtime (generation 1, a 10 s heartbeat) whose silence is measured on ``now[0]``
    and whose sleeps go to ``sleeper``: no heartbeat thread, the sleeper says when one beats."""
    return ObserverRuntime(
        registry,
        name="obs",
        generation=1,
        kinds=KINDS,
        heartbeat_seconds=10,
        sleeper=sleeper,
        monotonic=lambda: now[0],
        heartbeat_thread=False,
    )


def test_given_no_heartbeat_accepted_when_the_observer_sleeps_then_it_wakes_fenced_at_the_deadline(
    started: ObserverRegistry, stored: StoredObserver, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    sleeps: list[float] = []

    def sleeper(stopping: threading.Event, seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds  # the heartbeat thread is blocked: nothing else happens meanwhile

    def work(ctx: ObserverContext) -> None:
        ctx.sleep(15)
        ctx.sleep(60)
        ctx.sleep(60)

    install(monkeypatch, work)
    runtime = sleeping_on(started, sleeper, now)

    code = runtime.run()

    assert code is ExitCode.FENCED
    assert sleeps == [15, 5]  # the second sleep ends at 20 s of silence, the third never starts
    assert "last_exit" not in stored.raw()


def test_given_heartbeats_accepted_when_the_observer_sleeps_long_then_it_sleeps_it_all(
    started: ObserverRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    sleeps: list[float] = []
    runtime: ObserverRuntime

    def sleeper(stopping: threading.Event, seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds
        runtime.heartbeat_once()

    def work(ctx: ObserverContext) -> None:
        ctx.sleep(45)
        started.request_stop("obs")
        ctx.sleep(1)
        ctx.sleep(1)

    install(monkeypatch, work)
    runtime = sleeping_on(started, sleeper, now)

    assert runtime.run() is ExitCode.CLEAN
    assert sleeps == [20, 20, 5, 1]  # woken at each deadline, and back to sleep after a beat


@pytest.mark.parametrize(("interval", "read_timeout"), [(30, 5), (9, 3), (6, 2), (1, 1)])
def test_given_the_container_when_it_builds_its_client_then_calls_cannot_outlast_the_fence(
    monkeypatch: pytest.MonkeyPatch, interval: int, read_timeout: float
) -> None:
    built: list[dict[str, Any]] = []

    def client(service: str, **kwargs: Any) -> Any:
        built.append({"service": service, **kwargs})
        raise NoRegionError()

    monkeypatch.setattr(main.boto3, "client", client)
    env = {
        "VIGIL_REGISTRY_TABLE": "t",
        "VIGIL_OBSERVER_NAME": "btc",
        "VIGIL_OBSERVER_GENERATION": "3",
        "VIGIL_OBSERVER_KINDS": '{"ticker": "observers.ticker.run"}',
        "VIGIL_HEARTBEAT_SECONDS": str(interval),
    }

    assert main.main(env) == ExitCode.BAD_CONFIGURATION

    [call] = built
    config = call["config"]
    assert call["service"] == "dynamodb"
    assert (config.connect_timeout, config.read_timeout) == (2, read_timeout)
    # three tries (botocore's client setting max_attempts would count retries: said plainly)
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_a_handed_over_container_checkpoints_and_exits_clean_on_sigterm(
    started: ObserverRegistry,
    dynamodb: Any,
    registry_table: str,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rollout's hand-over: the reconciler marks it STOPPING (desired still RUNNING) and stops
    its task; the container keeps beating and checkpointing, then exits 0 on the SIGTERM, so its
    STOPPED event restarts it without counting a failure."""
    store = FleetStore(dynamodb, registry_table)
    harness = Harness(started, clock, generation=1)

    def reconciler_then_ecs(beat: int) -> None:
        if beat == 2:  # the resync hands it over: STOPPING, then StopTask
            record = store.get("obs")
            assert record is not None
            store.apply(record, d.HandOver("td:2"), clock(), None)
        if beat == 3:  # ECS delivers the StopTask as SIGTERM
            harness.runtime.request_stop(StopReason.SIGTERM)

    harness.before_beat = reconciler_then_ecs
    install(monkeypatch, looping)

    code = harness.runtime.run()

    observer = started.get("obs")
    assert code is ExitCode.CLEAN
    assert observer.checkpoint == {"count": 3}  # checkpoints went on after the hand-over began
    assert (observer.status, observer.desired, observer.generation) == (
        Status.STOPPING,
        Desired.RUNNING,
        1,
    )
    assert observer.last_exit is not None and observer.last_exit.reason == "SIGTERM"


def test_given_a_fenced_write_refused_when_it_escapes_run_then_fenced_exit_not_a_crash(
    started: ObserverRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ctx.fenced`` refusing a write means a newer generation wrote: stop as fenced (exit 3,
    no exit report), not as a crash the reconciler would restart."""
    from vigil.effects import Fenced as EffectFenced

    def refused(ctx: ObserverContext) -> None:
        raise EffectFenced("table t item k", "observer:obs#1", "observer:obs#2")

    install(monkeypatch, refused)

    code = Harness(started, clock, generation=1).runtime.run()

    assert code is ExitCode.FENCED
    assert started.get("obs").last_exit is None
