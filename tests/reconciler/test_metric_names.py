"""The metrics the dashboard and alarms read are the ones the code emits: names, namespace, dimensions.

Each metric is emitted through the real code on moto (a resync for the fleet's gauges, the job
handler for ticks, the reconciler's Powertools sink for the rest), the EMF lines are read back, and
every Vigil series the synthesized dashboard and alarms read must be among them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import pytest

from handlers.tasks_api import run_audit
from tests.conftest import REGION
from tests.helpers.jobs import FaultyTransactions
from tests.helpers.monitoring import emitted, insights_queries, series_read
from tests.helpers.moto_fleet import MotoFleet
from tests.helpers.tables import create_tasks_table
from tests.helpers.tasks import PLAIN, build_stack, invoke, record_of, records
from vigil import telemetry
from vigil.clock import iso_seconds
from vigil.contract.metrics import powertools_environment
from vigil.jobs import scheduled_job
from vigil.jobs.finish import OutcomeUnrecorded
from vigil.observers.fleet_gauges import fleet_gauges
from vigil.observers.model import Status
from vigil.observers.reconciler import powertools_metric
from vigil.tasks import task
from vigil.telemetry import METRIC_UNITS, JobMetric, ObserverMetric, TaskMetric
from vigil_tools.emulator.template import Synthesized, create_table

TICK = "2026-11-22T12:00:00Z"


class Context:
    aws_request_id = "r-1"
    function_name = "cleanup"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cleanup"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


class HurriedContext(Context):
    def get_remaining_time_in_millis(self) -> int:
        return 1_000  # under persist's reserve: one try at the finish, then out of time


@pytest.fixture
def fresh_metrics() -> Iterator[None]:
    telemetry.metrics().clear_metrics()
    yield
    telemetry.metrics().clear_metrics()


def test_every_gauge_a_resync_emits_is_one_the_dashboard_reads(
    fleet: MotoFleet, capsys: pytest.CaptureFixture[str], fresh_metrics: None
) -> None:
    # Given a fleet with a RUNNING observer 40 s past its heartbeat, a FAILED and a STOPPED one
    alive, _ = fleet.running_task("alive", 1)
    fleet.put(replace(alive, heartbeat_at=fleet.clock() - timedelta(seconds=40)))
    fleet.put(fleet.observer("broken", status=Status.FAILED))
    # When a resync runs with the Lambda's real metric sink
    report = fleet.reconciler(metric=powertools_metric).resync(holder="r-1")
    assert report is not None
    telemetry.metrics().flush_metrics()
    series = emitted(capsys.readouterr().out)
    # Then each gauge is emitted once, fleet-wide, with its unit, and the values are the fleet's
    gauges = {s: u for s, u in series.items() if s[1].startswith("Fleet")}
    fleet_wide = frozenset({("service", "vigil")})
    assert {s[1] for s in gauges} == {
        m.value for m in ObserverMetric if m.value.startswith("Fleet")
    }
    assert all(s[0] == "Vigil" and s[2] == fleet_wide for s in gauges)
    assert gauges[("Vigil", "FleetOldestHeartbeatAge", fleet_wide)] == {"Seconds"}
    assert gauges[("Vigil", "FleetRunning", fleet_wide)] == {"Count"}


def test_the_gauges_count_by_status_and_age_only_running_heartbeats(fleet: MotoFleet) -> None:
    now = fleet.clock()
    records = [
        _record(fleet, "a", Status.RUNNING, heartbeat_at=now - timedelta(seconds=70)),
        _record(fleet, "b", Status.RUNNING, heartbeat_at=now - timedelta(seconds=10)),
        _record(fleet, "c", Status.STOPPED, heartbeat_at=now - timedelta(days=2)),
        _record(fleet, "d", Status.PENDING),
    ]
    gauges = fleet_gauges(records, now)
    assert gauges[ObserverMetric.FLEET_RUNNING] == 2
    assert gauges[ObserverMetric.FLEET_STOPPED] == gauges[ObserverMetric.FLEET_PENDING] == 1
    assert gauges[ObserverMetric.FLEET_FAILED] == 0
    assert gauges[ObserverMetric.FLEET_DESIRED] == 4
    assert gauges[ObserverMetric.FLEET_OLDEST_HEARTBEAT_AGE] == 70
    assert fleet_gauges([], now)[ObserverMetric.FLEET_OLDEST_HEARTBEAT_AGE] == 0


def _record(fleet: MotoFleet, name: str, status: Status, **fields: Any) -> Any:
    from vigil.observers.decisions import Record

    return Record(fleet.observer(name, status=status, **fields))


def test_what_the_dashboard_and_alarms_read_is_what_the_code_emits(
    fleet: MotoFleet,
    synthesized: Synthesized,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fresh_metrics: None,
) -> None:
    # The functions' Powertools environment, as deployed (per-kind metrics take `service` from it)
    for name, value in powertools_environment().items():
        monkeypatch.setenv(name, value)
    # The fleet: a resync (gauges, pass duration), then every other fleet metric once via the sink
    fleet.running_task("alive", 1)
    assert fleet.reconciler(metric=powertools_metric).resync(holder="r-1") is not None
    for metric in ObserverMetric:
        if not metric.value.startswith("Fleet"):
            powertools_metric(metric, "ticker", 1)
    telemetry.metrics().flush_metrics()
    # A job: a run, a duplicate, a late tick, a failed run and a malformed event
    table = create_table(synthesized, fleet.dynamodb, "Vigil/JobRuns", "job-runs")
    for name, value in {
        "VIGIL_JOB_NAME": "cleanup",
        "VIGIL_RUNS_TABLE": table,
        "VIGIL_OVERLAP": "skip",
        "VIGIL_MAX_LATENESS_SECONDS": "120",
    }.items():
        monkeypatch.setenv(name, value)
    handler = scheduled_job(lambda run: None, client=fleet.dynamodb, clock=fleet.clock)

    def fail(run: Any) -> None:
        raise RuntimeError("boom")

    failing = scheduled_job(fail, client=fleet.dynamodb, clock=fleet.clock)
    on_time = iso_seconds(fleet.clock())
    late = iso_seconds(fleet.clock() - timedelta(hours=1))
    earlier = iso_seconds(fleet.clock() - timedelta(seconds=30))
    handler(_event(on_time), Context())
    handler(_event(on_time), Context())
    handler(_event(late), Context())
    with pytest.raises(RuntimeError):
        failing(_event(earlier), Context())
    # ... and a run whose finish is throttled past the little time its invocation has left
    throttled = FaultyTransactions(fleet.dynamodb, plan=[None], always="throttled")
    unrecorded = scheduled_job(lambda run: None, client=throttled, clock=fleet.clock)
    minute_ago = iso_seconds(fleet.clock() - timedelta(seconds=60))
    fleet.clock.advance(1)  # a later claim: its token passes the job's fence at the first try
    with pytest.raises(OutcomeUnrecorded):
        unrecorded(_event(minute_ago), HurriedContext())
    with pytest.raises(ValueError):
        handler({"nonsense": True}, Context())
    _drive_a_task(fleet)
    series = emitted(capsys.readouterr().out)

    # Every metric the dashboard or an alarm reads in the Vigil namespace ...
    read = series_read(synthesized, "Vigil")
    known = {m.value for m in (*JobMetric, *ObserverMetric, *TaskMetric)}
    assert read and {name for _, name, _ in read} <= known
    # ... is emitted under that name with those dimension names (job values per deployed job)
    shapes = {(ns, name, frozenset(k for k, _ in dims)) for ns, name, dims in series}
    emitted_names = {name for _, name, _ in series}
    for namespace, name, dims in read:
        if name in emitted_names:
            assert (namespace, name, frozenset(k for k, _ in dims)) in shapes, name
    job_read = {name for _, name, dims in read if any(k == "job" for k, _ in dims)}
    task_read = {name for _, name, dims in read if any(k == "task" for k, _ in dims)}
    fleet_read = {name for _, name, dims in read if not any(k in ("job", "task") for k, _ in dims)}
    # A flow's sleep and wait, counted for the stack: tests/tasks/test_stuck.py drives both and
    # checks they carry no task dimension.
    flow_states = {"FlowSlept", "FlowWaited"}
    assert fleet_read - flow_states <= emitted_names, fleet_read - emitted_names
    driven = {
        "JobRunSucceeded",
        "JobDuplicateSuppressed",
        "JobTickMissed",
        "JobRunFailed",
        "JobFinishUnrecorded",
    }
    assert driven | {"JobEventMalformed"} <= emitted_names
    # Not driven here: skips and fences need a race; the audit runs in the jobs-control function
    # (handlers/jobs_control.py emits it with the same service and job dimensions); an uncertain
    # effect needs a crash between its intent and its completion (tests/effects drives it).
    assert job_read - emitted_names <= {
        "JobTickSkipped",
        "JobRunFenced",
        "JobTickNeverDelivered",
        "JobRunUncertain",
        "JobTickPaused",
    }
    # The stack's Metrics Insights alarms read a metric under exactly the dimensions its SCHEMA
    # names: each one the code emits, it emits so (one series per job or task, and per stage).
    for query in insights_queries(synthesized):
        found = re.match(r'SELECT SUM\("(\w+)"\) FROM SCHEMA\("Vigil", ([\w, ]+)\)', query)
        assert found, query
        metric, keys = found[1], frozenset(found[2].split(", "))
        emitted_shapes = {dims for _, name, dims in shapes_named(series, metric)}
        assert emitted_shapes <= {keys}, (metric, emitted_shapes)
    # A task: a run, a duplicate copy of it, a malformed message. Failures, retries, fences,
    # cancels and lost events need a race or a fault (tests/tasks drives each of them).
    assert {"TaskSucceeded", "TaskDuplicateSuppressed", "TaskMessageMalformed"} <= emitted_names
    assert task_read - emitted_names <= {
        "TaskRetried",
        "TaskRunFenced",
        "TaskCancelled",
        "TaskFailed",
        "TaskFinishUnrecorded",
        "TaskEventUnsent",
        "TaskRunUncertain",
        "TaskProgressDropped",
        # A flow's compensations (tests/tasks/test_flows.py drives both).
        "FlowCompensated",
        "FlowCompensationFailed",
    }
    units = {name: u for (_, name, _), u in series.items()}
    for metric, unit in METRIC_UNITS.items():
        assert units[metric] == {unit}


def shapes_named(series: Any, metric: str) -> set[tuple[str, str, frozenset[str]]]:
    return {
        (ns, name, frozenset(k for k, _ in dims)) for ns, name, dims in series if name == metric
    }


def _drive_a_task(fleet: MotoFleet) -> None:
    """One send-receipt on moto, as its function runs it: a run, a copy of it, a malformed one."""
    sqs = boto3.client("sqs", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    table = create_tasks_table(fleet.dynamodb)
    stack = build_stack(fleet.dynamodb, sqs, events, None, fleet.clock, table)
    handler = task(
        lambda run, payload: {"ok": True},
        settings=stack.settings(PLAIN),
        dynamodb=fleet.dynamodb,
        sqs=sqs,
        events=events,
        clock=fleet.clock,
        sleep=fleet.clock.advance,
    )
    task_id = stack.client().enqueue(PLAIN, {"order": 1})
    [message] = stack.messages(stack.catalog.spec(PLAIN).queue_url)
    assert task_id in message["Body"]
    run = records([message])
    invoke(handler, run)
    invoke(handler, run)
    invoke(handler, [record_of("not json", message_id="m-2")])
    run_audit(stack.client(), fleet.clock)  # the stranded-tasks audit's stack-wide count


def _event(scheduled_time: str) -> dict[str, Any]:
    return {"vigil": {"job": "cleanup", "scheduled_time": scheduled_time, "execution_id": "e"}}
