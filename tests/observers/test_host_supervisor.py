"""The host's loop, stepped with chosen times: heartbeats, assignments, stops, kills, fencing.

Children are fakes here (the supervisor only sees exit codes and sends signals); the tables are
moto's, so the heartbeat and the exit reports are the real writes. Real processes are in
``test_host_process.py``, where isolation is the point.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.helpers.hosts import (
    TASK_ARN,
    FakeChild,
    FakeLauncher,
    assign,
    host_item,
    mark_host,
    place,
    put_host,
)
from tests.helpers.moto_fleet import CallCounter
from tests.helpers.observers import HOSTS_TABLE, create_hosts_table
from vigil.clock import ManualClock
from vigil.contract.hosts import HOST_EXIT, HostStatus
from vigil.contract.observers import ExitCode
from vigil.observers.host_process.calls import Calls, InlineCalls, Outcome
from vigil.observers.host_process.exits import describe_exit
from vigil.observers.host_process.heartbeat_store import HeartbeatStore
from vigil.observers.host_process.plan import ChildView, Plan, plan
from vigil.observers.host_process.supervisor import HostSupervisor
from vigil.observers.registry import ObserverRegistry

from .test_registry import raw_item

INTERVAL = 10.0
STOP_TIMEOUT = 5.0


class Host:
    """A supervisor on moto's tables, stepped by the test."""

    def __init__(
        self,
        client: Any,
        registry_table: str,
        clock: ManualClock,
        slots: int,
        stop_timeout: float = STOP_TIMEOUT,
        calls: Calls | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.launcher = FakeLauncher()
        self.now = 0.0
        self.pauses: list[float] = []
        self.supervisor = HostSupervisor(
            HeartbeatStore(client, HOSTS_TABLE, host_id="h1", task_arn=TASK_ARN, clock=clock),
            self.launcher,
            ObserverRegistry(client, registry_table, clock=clock),
            slots=slots,
            heartbeat_seconds=INTERVAL,
            stop_timeout_seconds=stop_timeout,
            fence_grace_seconds=1.0,
            monotonic=lambda: self.now,  # the host's clock is the test's
            sleep=self.pauses.append,  # retries pause without sleeping
            calls=calls,
        )

    def step(self, seconds: float = 0.0) -> ExitCode | None:
        """Move time on and tick once (``run`` ticks at least every half interval: at each
        heartbeat, every lease being one interval)."""
        assert seconds <= INTERVAL / 2, "a step longer than half an interval skips a heartbeat"
        self.now += seconds
        self.clock.advance(seconds)
        return self.supervisor.tick(self.now)


NewHost = Callable[..., Host]
"""``new_host(slots=5, stop_timeout=60, calls=...)``: h1's supervisor, h1 already in the hosts
table."""


@pytest.fixture
def new_host(dynamodb: Any, registry_table: str, clock: ManualClock) -> NewHost:
    create_hosts_table(dynamodb)
    put_host(dynamodb, HOSTS_TABLE, "h1")
    return functools.partial(Host, dynamodb, registry_table, clock)


@pytest.fixture
def host(new_host: NewHost) -> Host:
    return new_host(slots=50)


def placed(host: Host, registry_table: str, names: dict[str, int]) -> None:
    """Observers the reconciler placed on h1 (registry items and the host's assignment)."""
    registry = ObserverRegistry(host.client, registry_table)
    for name, generation in names.items():
        registry.create(name, "ticker", {})
        place(host.client, registry_table, name, generation, "h1")
    assign(host.client, HOSTS_TABLE, "h1", names)


@pytest.mark.parametrize("k", [1, 10, 50])
def test_given_k_observers_when_intervals_pass_then_two_heartbeat_writes_each_interval(
    host: Host, registry_table: str, k: int
) -> None:
    placed(host, registry_table, {f"obs-{i}": 1 for i in range(k)})
    counter = CallCounter()
    counter.attach(host.client)

    for _ in range(30):
        host.step(INTERVAL / 10)  # steps between beats write nothing

    assert dict(counter.calls) == {"UpdateItem": 6}  # two per interval: the lease is one
    assert len(host.launcher.started) == k
    assert len(host_item(host.client, HOSTS_TABLE, "h1")["running"]) == k


def test_given_assignment_changes_when_the_host_beats_then_it_starts_and_stops_to_match(
    new_host: NewHost, registry_table: str
) -> None:
    host = new_host(slots=5, stop_timeout=60)
    placed(host, registry_table, {"a": 1, "b": 1})
    host.step()
    assert host.launcher.pairs() == [("a", 1), ("b", 1)]

    assign(host.client, HOSTS_TABLE, "h1", {"b": 1, "c": 4})
    host.step(INTERVAL / 2)

    assert host.launcher.pairs() == [("a", 1), ("b", 1), ("c", 4)]
    assert host.launcher.child("a").signals == ["TERM"] and host.launcher.child("b").signals == []
    assert host_item(host.client, HOSTS_TABLE, "h1")["running"]["a"]["state"] == "RUNNING"
    host.step(INTERVAL / 2)
    assert host_item(host.client, HOSTS_TABLE, "h1")["running"]["a"]["state"] == "STOPPING"


def test_given_a_generation_change_when_the_old_child_exits_then_the_new_one_starts(
    host: Host, registry_table: str
) -> None:
    placed(host, registry_table, {"a": 1})
    host.step()
    place(host.client, registry_table, "a", 2, "h1")
    assign(host.client, HOSTS_TABLE, "h1", {"a": 2})

    host.step(INTERVAL / 2)
    assert host.launcher.child("a").signals == ["TERM"]
    assert host.launcher.pairs() == [("a", 1)]  # not two generations at once

    host.launcher.child("a").exitcode = 0
    host.step(0.1)

    assert host.launcher.pairs() == [("a", 1), ("a", 2)]
    # the old generation's report is refused: the observer moved on
    assert HOST_EXIT not in raw_item(host.client, registry_table, "a")


def test_given_a_child_ignoring_its_stop_when_the_timeout_passes_then_only_it_is_killed(
    host: Host, registry_table: str
) -> None:
    placed(host, registry_table, {"a": 1, "b": 1})
    host.step()
    assign(host.client, HOSTS_TABLE, "h1", {"b": 1})
    host.step(INTERVAL / 2)

    host.step(STOP_TIMEOUT - 0.1)
    assert host.launcher.child("a").signals == ["TERM"]
    host.step(0.1)
    assert host.launcher.child("a").signals == ["TERM", "KILL"]
    host.step(0.1)

    assert host.launcher.child("b").signals == []
    assert set(host.supervisor.children) == {"b"}
    report = raw_item(host.client, registry_table, "a")[HOST_EXIT]
    assert report["exit_code"] == ExitCode.CRASH and report["generation"] == 1
    assert report["reason"] == (
        "killed by signal SIGKILL after ignoring the stop request for 5 s "
        "(asked to stop: no longer assigned)"
    )


def test_given_a_child_that_crashed_when_still_assigned_then_reported_once_and_not_restarted(
    host: Host, registry_table: str
) -> None:
    placed(host, registry_table, {"a": 1, "b": 1})
    host.step()
    host.launcher.child("a").exitcode = 7

    host.step(INTERVAL / 2)
    host.step(INTERVAL / 2)

    assert host.launcher.pairs() == [("a", 1), ("b", 1)]  # restarts are the reconciler's
    report = raw_item(host.client, registry_table, "a")[HOST_EXIT]
    assert report["exit_code"] == ExitCode.CRASH and report["reason"] == "exited with code 7"
    assert set(host_item(host.client, HOSTS_TABLE, "h1")["running"]) == {"b"}

    place(host.client, registry_table, "a", 2, "h1")
    assign(host.client, HOSTS_TABLE, "h1", {"a": 2, "b": 1})
    host.step(INTERVAL / 2)
    assert host.launcher.pairs() == [("a", 1), ("b", 1), ("a", 2)]


@pytest.mark.parametrize(
    "change", [{"status": HostStatus.LOST}, {"task_arn": "arn:aws:ecs:::task/vigil/other"}]
)
def test_given_a_zombie_host_when_it_beats_then_it_fences_every_child_and_exits_3(
    host: Host, registry_table: str, change: dict[str, Any]
) -> None:
    placed(host, registry_table, {"a": 1, "b": 1, "c": 1})
    host.step()
    mark_host(host.client, HOSTS_TABLE, "h1", **change)
    counter = CallCounter()
    counter.attach(host.client)

    assert host.step(INTERVAL / 2) is None
    assert all(c.signals == ["USR1"] for c in host.launcher.started)
    host.launcher.child("a").exitcode = 3
    host.launcher.child("b").exitcode = 0
    assert host.step(0.5) is None
    assert host.step(0.5) is None  # c ignored the fence past the grace: killed
    code = host.step(0.1)

    assert code is ExitCode.FENCED
    assert host.launcher.child("c").signals == ["USR1", "KILL"]
    assert dict(counter.calls) == {"UpdateItem": 1}  # the refused beat; no reports, no more beats
    assert all(HOST_EXIT not in raw_item(host.client, registry_table, n) for n in "abc")


def test_given_the_hosts_table_unreachable_when_two_intervals_pass_then_the_host_fences_itself(
    host: Host, registry_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    placed(host, registry_table, {"a": 1})
    host.step()

    def unreachable(*_: Any, **__: Any) -> Any:
        raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, "UpdateItem")

    monkeypatch.setattr(host.supervisor._heartbeats, "beat", unreachable)
    host.step(INTERVAL / 2)
    assert host.supervisor.fenced is None and host.launcher.child("a").signals == []
    host.step(INTERVAL / 2)

    assert host.supervisor.fenced is not None and "presumed replaced" in host.supervisor.fenced
    assert host.launcher.child("a").signals == ["USR1"]


def test_given_sigterm_when_children_hand_over_then_reported_and_the_host_exits_0(
    new_host: NewHost, registry_table: str
) -> None:
    host = new_host(slots=5, stop_timeout=60)
    placed(host, registry_table, {"a": 1, "b": 1})
    host.step()

    host.supervisor.request_shutdown()
    assert host.step(0.1) is None
    assert all(c.signals == ["TERM"] for c in host.launcher.started)
    host.launcher.child("a").exitcode = 0
    assert host.step(INTERVAL / 2) is None  # still heartbeating while b checkpoints
    assert host_item(host.client, HOSTS_TABLE, "h1")["running"] == {
        "b": {"generation": 1, "state": "STOPPING"}
    }
    host.launcher.child("b").exitcode = 0
    code = host.step(0.1)

    assert code is ExitCode.CLEAN and host.launcher.pairs() == [("a", 1), ("b", 1)]
    report = raw_item(host.client, registry_table, "a")[HOST_EXIT]
    assert report["exit_code"] == 0
    assert report["reason"] == "exited cleanly (asked to stop: host shutting down)"


def test_given_more_assigned_than_slots_when_the_host_beats_then_it_runs_only_its_slots(
    new_host: NewHost, registry_table: str
) -> None:
    host = new_host(slots=2)
    placed(host, registry_table, {"a": 1, "b": 1, "c": 1})

    host.step()

    assert host.launcher.pairs() == [("a", 1), ("b", 1)]


@pytest.mark.parametrize(
    "error",
    [
        OSError("Cannot allocate memory"),
        # multiprocessing's answer when the forkserver dies while it forks the child (issue 33)
        EOFError("unexpected EOF"),
        ConnectionRefusedError(111, "Connection refused"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_given_a_launcher_that_fails_when_starting_then_reported_as_a_crash_and_others_start(
    host: Host, registry_table: str, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    placed(host, registry_table, {"a": 1, "b": 1, "c": 1})
    real = host.launcher.start

    def start(name: str, generation: int) -> FakeChild:
        if name == "b":
            raise error
        return real(name, generation)

    monkeypatch.setattr(host.launcher, "start", start)

    assert host.step() is None

    assert host.launcher.pairs() == [("a", 1), ("c", 1)]
    report = raw_item(host.client, registry_table, "b")[HOST_EXIT]
    assert report["exit_code"] == 1 and str(error) in report["reason"]
    assert host.step(INTERVAL / 2) is None and set(host.supervisor.children) == {"a", "c"}


# -- the pure parts ------------------------------------------------------------------------------


def test_plan_stops_the_unassigned_and_the_replaced_and_waits_for_them_before_restarting() -> None:
    children = {
        "a": ChildView(1, stopping=False),
        "b": ChildView(1, stopping=False),
        "c": ChildView(1, stopping=True),
    }

    step = plan({"b": 2, "c": 2, "d": 1, "e": 5}, children, {"e": 5, "z": 1}, slots=4)

    assert step == Plan(start=(("d", 1),), stop=("a", "b"), forget=("z",), no_slot=())


def test_plan_when_not_accepting_stops_all_and_starts_nothing() -> None:
    step = plan({"a": 1, "b": 1}, {"a": ChildView(1, stopping=False)}, {}, slots=5, accepting=False)

    assert step == Plan(stop=("a",))


@pytest.mark.parametrize(
    ("exitcode", "code", "reason"),
    [
        (0, ExitCode.CLEAN, "exited cleanly"),
        (1, ExitCode.CRASH, "the observer's code raised"),
        (2, ExitCode.BAD_CONFIGURATION, "bad configuration"),
        (3, ExitCode.FENCED, "fenced"),
        (7, ExitCode.CRASH, "exited with code 7"),
        (-11, ExitCode.CRASH, "killed by signal SIGSEGV"),
        (-9, ExitCode.CRASH, "killed by signal SIGKILL"),
    ],
)
def test_describe_exit(exitcode: int, code: ExitCode, reason: str) -> None:
    assert describe_exit(exitcode) == (code, reason)


def test_given_a_child_already_stopping_when_the_host_is_fenced_then_it_is_fenced_too(
    new_host: NewHost, registry_table: str
) -> None:
    host = new_host(slots=5, stop_timeout=60)
    placed(host, registry_table, {"a": 1, "b": 1})
    host.step()
    assign(host.client, HOSTS_TABLE, "h1", {"b": 1})
    host.step(INTERVAL / 2)
    mark_host(host.client, HOSTS_TABLE, "h1", status=HostStatus.LOST)

    host.step(INTERVAL / 2)
    host.step(1.0)  # the fence grace, shorter than the stop timeout a still had
    host.step(0.1)

    assert host.launcher.child("a").signals == ["TERM", "USR1", "KILL"]
    assert host.launcher.child("b").signals == ["USR1", "KILL"]
    assert host.supervisor.children == {}
    assert all(HOST_EXIT not in raw_item(host.client, registry_table, n) for n in "ab")


def test_given_sigterm_when_the_host_steps_then_it_announces_draining_before_stopping_anyone(
    host: Host, registry_table: str
) -> None:
    placed(host, registry_table, {"a": 1, "b": 1})
    host.step()
    counter = CallCounter()
    counter.attach(host.client)

    host.supervisor.request_shutdown()
    host.step(0.1)  # well before the next interval: the announcement does not wait for it
    assert dict(counter.calls) == {"UpdateItem": 1}  # one write: the heartbeat carries it

    item = host_item(host.client, HOSTS_TABLE, "h1")
    assert item["status"] == HostStatus.DRAINING and "SIGTERM" in item["status_reason"]
    assert item["heartbeat_at_ms"] == host.clock().timestamp() * 1000
    assert item["version"] == 1  # the manager's versioned writes are not made to fail
    assert all(c.signals == ["TERM"] for c in host.launcher.started)

    mark_host(host.client, HOSTS_TABLE, "h1", status=HostStatus.RUNNING)  # a stale manager write
    host.step(INTERVAL / 2)
    assert host_item(host.client, HOSTS_TABLE, "h1")["status"] == HostStatus.DRAINING


@pytest.mark.parametrize(
    "change", [{"status": HostStatus.LOST}, {"task_arn": "arn:aws:ecs:::task/vigil/other"}]
)
def test_given_a_zombie_host_when_sigterm_arrives_then_its_announcement_is_refused_and_it_fences(
    host: Host, registry_table: str, change: dict[str, Any]
) -> None:
    placed(host, registry_table, {"a": 1})
    host.step()
    mark_host(host.client, HOSTS_TABLE, "h1", **change)
    before = host_item(host.client, HOSTS_TABLE, "h1")

    host.supervisor.request_shutdown()
    host.step(0.1)

    assert host_item(host.client, HOSTS_TABLE, "h1") == before  # nothing written
    assert host.supervisor.fenced is not None
    assert host.launcher.child("a").signals == ["USR1"]  # fenced, not asked to checkpoint


# -- issue 19: exit reports that must land, a lease of one interval, liveness without clocks ----


def throttle() -> ClientError:
    return ClientError(
        {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
        "UpdateItem",
    )


class ThrottledReports:
    """The registry, but its next ``failures`` exit reports are throttled; ``meanwhile`` runs at
    the first report (something that happens while the host is busy reporting)."""

    def __init__(self, inner: Any, failures: int, meanwhile: Any = None) -> None:
        self.inner, self.failures, self.meanwhile, self.calls = inner, failures, meanwhile, 0

    def report_host_exit(self, *args: Any, **kwargs: Any) -> bool:
        self.calls += 1
        if self.calls == 1 and self.meanwhile is not None:
            self.meanwhile()
        if self.failures > 0:
            self.failures -= 1
            raise throttle()
        return bool(self.inner.report_host_exit(*args, **kwargs))


def throttled(host: Host, failures: int, meanwhile: Any = None) -> ThrottledReports:
    reports = ThrottledReports(host.supervisor._exits.reports, failures, meanwhile)
    host.supervisor._exits.reports = reports
    return reports


def test_given_one_throttled_exit_report_when_the_host_steps_on_then_the_report_lands(
    host: Host, registry_table: str
) -> None:
    placed(host, registry_table, {"a": 1, "b": 1})
    host.step()
    throttled(host, failures=1)

    host.launcher.child("a").exitcode = 7
    host.step(0.1)
    host.step(INTERVAL / 2)

    report = raw_item(host.client, registry_table, "a").get(HOST_EXIT)
    assert report is not None and report["generation"] == 1 and report["exit_code"] == 1


def test_given_exit_reports_throttled_past_their_budget_then_kept_and_retried_until_they_land(
    host: Host, registry_table: str
) -> None:
    placed(host, registry_table, {"a": 1, "b": 1, "c": 1})
    host.step()
    # b exits while the host is busy retrying a's report
    reports = throttled(
        host, failures=10_000, meanwhile=lambda: setattr(host.launcher.child("b"), "exitcode", 0)
    )

    host.launcher.child("a").exitcode = 7
    host.step(INTERVAL / 2)
    assert HOST_EXIT not in raw_item(host.client, registry_table, "a")
    assert host.supervisor.pending_reports == {"a": 1}
    tried = reports.calls

    host.step(INTERVAL / 2)
    assert reports.calls > tried  # still pending: tried again at the next step
    assert host.supervisor.pending_reports == {"a": 1, "b": 1}
    # the heartbeat never lists an exited child, reported or not
    assert set(host_item(host.client, HOSTS_TABLE, "h1")["running"]) == {"c"}

    reports.failures = 0
    host.step(INTERVAL / 2)
    assert raw_item(host.client, registry_table, "a")[HOST_EXIT]["exit_code"] == ExitCode.CRASH
    assert raw_item(host.client, registry_table, "b")[HOST_EXIT]["exit_code"] == ExitCode.CLEAN
    calls = reports.calls
    host.step(INTERVAL / 2)
    assert reports.calls == calls  # landed: never written again
    assert host.launcher.pairs() == [("a", 1), ("b", 1), ("c", 1)]  # restarts stay the manager's


def test_given_sigterm_with_an_exit_report_pending_then_the_host_exits_only_once_it_lands(
    host: Host, registry_table: str
) -> None:
    placed(host, registry_table, {"a": 1})
    host.step()
    reports = throttled(host, failures=10_000)
    host.supervisor.request_shutdown()
    host.step(0.1)
    host.launcher.child("a").exitcode = 0

    assert host.step(0.1) is None  # its report has not landed: a clean exit would lose it
    reports.failures = 0
    assert host.step(0.1) is ExitCode.CLEAN
    assert raw_item(host.client, registry_table, "a")[HOST_EXIT]["exit_code"] == ExitCode.CLEAN


def test_given_the_hosts_table_unreachable_then_children_are_gone_one_interval_after_the_last_beat(
    host: Host, registry_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The manager may place the next generations as soon as the host's task is reported
    # STOPPED, right after its last accepted heartbeat: the children must be gone one interval
    # after that beat was sent (fenced at the interval minus the fence grace, killed at it).
    placed(host, registry_table, {"a": 1})
    host.step()  # accepted, sent at 0

    def unreachable(*_: Any, **__: Any) -> Any:
        raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, "UpdateItem")

    monkeypatch.setattr(host.supervisor._heartbeats, "beat", unreachable)
    host.step(INTERVAL / 2)  # a failed beat alone fences nothing
    host.step(INTERVAL / 2 - 1.0 - 0.1)
    assert host.supervisor.fenced is None and host.launcher.child("a").signals == []

    host.step(0.1)  # one interval minus the fence grace (1 s here)
    assert host.supervisor.fenced is not None and "presumed replaced" in host.supervisor.fenced
    assert host.launcher.child("a").signals == ["USR1"]
    host.step(1.0)  # one interval after the last accepted beat was sent
    assert host.launcher.child("a").signals == ["USR1", "KILL"]
    assert host.step(0.1) is ExitCode.FENCED


def test_given_every_heartbeat_first_refused_by_a_throttle_then_its_retry_keeps_the_host(
    host: Host, registry_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    placed(host, registry_table, {"a": 1})
    host.step()
    real = host.supervisor._heartbeats.beat
    attempts = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        attempts.append(host.now)
        if len(attempts) % 2:
            raise throttle()
        return real(*args, **kwargs)

    monkeypatch.setattr(host.supervisor._heartbeats, "beat", flaky)
    for _ in range(6):
        host.step(INTERVAL / 2)

    assert len(attempts) == 12 and host.pauses  # each beat retried once, after a pause
    assert host.supervisor.fenced is None and host.launcher.child("a").signals == []


def test_each_heartbeat_carries_a_beat_counter_and_the_hosts_lease(
    host: Host, registry_table: str
) -> None:
    # The manager judges liveness by the counter changing (seen by its own clock), never by
    # comparing the host's clock with its own; the lease says how long after a beat the host's
    # children may still work without another accepted one.
    placed(host, registry_table, {"a": 1})
    beats = []
    for _ in range(3):
        host.step(INTERVAL / 2)
        item = host_item(host.client, HOSTS_TABLE, "h1")
        beats.append(item["beat"])

    assert beats == [1, 2, 3]
    assert item["lease_ms"] == INTERVAL * 1000
    assert item["version"] == 1  # still no version bump


# -- issue 33: calls that hang, not fail ---------------------------------------------------------


class Held:
    """A call the network holds: never answered unless released. ``sent``: its request reached
    DynamoDB at once (it is applied when started, its answer shows when released); else the
    request itself is held (applied when released, if ever)."""

    def __init__(self, work: Callable[[], Any], *, sent: bool) -> None:
        self._work = work
        self._outcome = Outcome[Any]()
        self._released = False
        if sent:
            self._outcome.run(work)

    def release(self) -> None:
        if not self._outcome.done():
            self._outcome.run(self._work)
        self._released = True

    def done(self) -> bool:
        return self._released

    def result(self) -> Any:
        return self._outcome.result()


class HangingCalls:
    """The host's calls: inline while ``hang`` is None; held while it is "request" (the request
    never arrives) or "answer" (it arrives and is applied, its answer is held). ``held`` keeps
    every call held, in order."""

    def __init__(self) -> None:
        self.hang: str | None = None
        self.held: list[Held] = []

    def start(self, work: Callable[[], Any]) -> Any:
        if self.hang is None:
            return InlineCalls().start(work)
        self.held.append(Held(work, sent=self.hang == "answer"))
        return self.held[-1]


def hanging_host(
    new_host: NewHost, registry_table: str, names: dict[str, int], stop_timeout: float = 5.0
) -> Host:
    host = new_host(slots=10, calls=HangingCalls(), stop_timeout=stop_timeout)
    placed(host, registry_table, names)
    host.step()  # accepted, sent at 0: the lease ends at 10
    return host


def calls_of(host: Host) -> HangingCalls:
    calls = host.supervisor._calls
    assert isinstance(calls, HangingCalls)
    return calls


def signals_at(host: Host, name: str) -> list[str]:
    return host.launcher.child(name).signals


@pytest.mark.parametrize("pending", [0, 6])
def test_given_every_call_hanging_from_the_cut_then_children_are_killed_at_the_lease_end(
    new_host: NewHost, registry_table: str, pending: int
) -> None:
    # Given 8 children under a lease from a beat sent at 0, of which ``pending`` exit just as
    # every call starts to hang (their exit reports are pending at the cut)
    names = {f"obs-{i}": 1 for i in range(8)}
    host = hanging_host(new_host, registry_table, names)
    calls_of(host).hang = "request"
    for name in list(names)[:pending]:
        host.launcher.child(name).exitcode = 1
    alive = list(names)[pending:]

    # When the host steps on (each step is as short as the test likes: nothing blocks it)
    fenced_at = killed_at = None
    while host.now < 12.0:
        code = host.step(0.25)
        if fenced_at is None and host.supervisor.fenced is not None:
            fenced_at = host.now
        if killed_at is None and all("KILL" in signals_at(host, n) for n in alive):
            killed_at = host.now
        if code is not None:
            break

    # Then it fenced one fence grace (1 s) before the lease's end and killed at its end, whatever
    # its calls (a beat at 5 and the reports, all unanswered) were doing
    assert (fenced_at, killed_at) == (9.0, 10.0)
    assert code is ExitCode.FENCED and host.supervisor.pending_reports == {}
    assert all(signals_at(host, n) == ["USR1", "KILL"] for n in alive)
    # the beat at 5; one report at a time: the first given up on at its deadline (5 s), the next
    # then until the fence
    assert len(calls_of(host).held) == (3 if pending else 1)


def test_given_exit_reports_that_hang_then_heartbeats_go_on_and_no_child_is_fenced(
    new_host: NewHost, registry_table: str
) -> None:
    host = hanging_host(new_host, registry_table, {f"obs-{i}": 1 for i in range(8)})
    calls = calls_of(host)
    for name in ("obs-0", "obs-1"):
        host.launcher.child(name).exitcode = 1
    calls.hang = "request"
    host.step(0.1)  # the first report is held from here on
    calls.hang = None

    for _ in range(8):  # four intervals
        assert host.step(INTERVAL / 2) is None

    assert host.supervisor.fenced is None
    assert host.supervisor.lease_end == host.now + INTERVAL  # each beat renewed it
    assert all(signals_at(host, f"obs-{i}") == [] for i in range(2, 8))
    # the held report was given up on at its deadline and both landed since
    assert host.supervisor.pending_reports == {}
    assert raw_item(host.client, registry_table, "obs-0")[HOST_EXIT]["exit_code"] == 1


def answer_held_from_5(new_host: NewHost, registry_table: str) -> tuple[Host, HangingCalls]:
    """Child "a" under a lease from a beat sent at 0; the beat sent at 5 is applied, its answer
    held."""
    host = hanging_host(new_host, registry_table, {"a": 1})
    calls = calls_of(host)
    calls.hang = "answer"
    host.step(INTERVAL / 2)
    return host, calls


def test_given_a_beat_answered_late_then_its_lease_counts_from_when_it_was_sent(
    new_host: NewHost, registry_table: str
) -> None:
    host, calls = answer_held_from_5(new_host, registry_table)
    host.step(3.5)
    calls.held[0].release()  # answered (accepted) at 8.5, before the fence at 9
    calls.hang = "request"  # and nothing after it is ever answered

    host.step(0.0)
    assert host.supervisor.lease_end == 15.0  # from 5, when it was sent; not 18.5
    for _ in range(int((14.0 - 8.5) / 0.5)):
        host.step(0.5)
    assert host.now == 14.0 and signals_at(host, "a") == ["USR1"]
    host.step(1.0)
    assert signals_at(host, "a") == ["USR1", "KILL"]


def test_given_a_beat_answered_after_the_fence_then_the_children_still_go(
    new_host: NewHost, registry_table: str
) -> None:
    host, calls = answer_held_from_5(new_host, registry_table)
    host.step(4.0)  # 9: the fence; the beat is given up on
    assert signals_at(host, "a") == ["USR1"]

    calls.held[0].release()  # it lands at 9.5: too late, the host is fenced for good
    host.step(0.5)
    host.step(0.5)

    assert signals_at(host, "a") == ["USR1", "KILL"] and host.now == 10.0
    assert host.supervisor.fenced is not None and host.step(0.1) is ExitCode.FENCED


def test_given_a_killed_child_not_ended_yet_then_the_host_waits_for_it_instead_of_spinning(
    host: Host, registry_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SIGKILL is not instant (a process in uninterruptible sleep ends when its I/O does): its
    # sentinel wakes the host then; a deadline already passed must not make every wait zero
    placed(host, registry_table, {"a": 1})
    host.step()
    child = host.launcher.child("a")
    monkeypatch.setattr(child, "kill", lambda: child.signals.append("KILL"))
    assign(host.client, HOSTS_TABLE, "h1", {})
    host.step(INTERVAL / 2)
    host.step(STOP_TIMEOUT)

    assert child.signals == ["TERM", "KILL"] and child.exitcode is None
    assert host.supervisor.next_wake(host.now) > 0


def test_given_half_the_lease_spent_without_a_renewal_then_no_child_is_started(
    new_host: NewHost, registry_table: str
) -> None:
    # A start may block for seconds (after the forkserver died, the next one imports its
    # preloads before it forks): with no renewal in sight it could run into the fence
    host = hanging_host(new_host, registry_table, {"a": 1}, stop_timeout=60)
    place(host.client, registry_table, "a", 2, "h1")
    assign(host.client, HOSTS_TABLE, "h1", {"a": 2})
    host.step(INTERVAL / 2)  # accepted at 5 (lease to 15): generation 1 is told to stop
    calls_of(host).hang = "request"  # nothing is answered from here on
    host.step(INTERVAL / 2)  # the beat at 10 hangs: 5 s of lease left
    host.launcher.child("a").exitcode = 0

    host.step(0.5)

    assert host.launcher.pairs() == [("a", 1)]  # generation 2 waits for a renewed lease
    for _ in range(8):
        host.step(0.5)
    assert host.supervisor.fenced is not None and host.launcher.pairs() == [("a", 1)]
