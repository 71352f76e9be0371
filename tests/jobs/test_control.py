"""Job control through the API and the guard, on moto with an injected clock.

Each manual request goes through ``build_control_app`` as API Gateway delivers it; the event it
sends to the job's function is then handed to the guard, exactly as Lambda would run it.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from tests.helpers.api_errors import Refusal, check_refusals
from tests.helpers.jobs import Body, GuardFactory, deliver, tick_at
from tests.helpers.rest import send_json
from vigil.clock import ManualClock
from vigil.contract.jobs import IDEMPOTENCY_PK
from vigil.contract.schedule import InvalidSchedule, Schedule
from vigil.jobs.audit import NEVER_DELIVERED, AuditIncomplete, audit
from vigil.jobs.control import JobSpec, backfill_plan, pause_terms
from vigil.jobs.control_api import ControlServices, build_control_app
from vigil.jobs.control_store import ControlStore, PauseChanged
from vigil.jobs.events import parse_tick
from vigil.jobs.guard import JobGuard
from vigil.jobs.model import Outcome, Overlap, RunStatus
from vigil.jobs.store import RunStore
from vigil_tools.api_client import ApiError, rest_event
from vigil_tools.jobs_control_cli import run_api_command, wait_for
from vigil_tools.lambda_context import LambdaContext

NOW = datetime(2026, 11, 22, 12, 2, 0, tzinfo=UTC)
TICK = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
OPERATOR = "arn:aws:iam::123456789012:user/operator"


class Api:
    """The jobs routes with moto behind them; ``sent`` holds what would be invoked."""

    def __init__(
        self,
        dynamodb: Any,
        table: str,
        clock: ManualClock,
        jobs: dict[str, JobSpec],
        keyed: bool = False,
    ):
        self.sent: list[tuple[str, dict[str, Any]]] = []
        store = DynamoDBPersistenceLayer(
            table_name=table,
            key_attr="pk",
            sort_key_attr="sk",
            static_pk_value=IDEMPOTENCY_PK,
            expiry_attr="expires_at",
            boto3_client=dynamodb,
        )
        self.services = ControlServices(
            jobs=jobs,
            control=ControlStore(dynamodb, table),
            runs=RunStore(dynamodb, table),
            invoke=lambda function, event: self.sent.append((function, event)),
            clock=clock,
            idempotency_store=store if keyed else None,
        )
        self.app = build_control_app(self.services)

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        **query: str,
    ) -> tuple[int, Any]:
        return send_json(self.app.resolve, method, path, body, headers=headers, query=query)


def spec(name: str = "cleanup", schedule: str = "cron(*/5 * * * ? *)", tz: str = "UTC") -> JobSpec:
    return JobSpec(
        name=name,
        function=f"fn-{name}",
        schedule=Schedule(schedule, tz),
        overlap="skip",
        max_lateness=timedelta(minutes=2),
        retention=timedelta(days=30),
    )


@pytest.fixture
def api(dynamodb: Any, runs_table: str, clock: ManualClock) -> Api:
    clock.set(NOW)
    return Api(dynamodb, runs_table, clock, {"cleanup": spec()})


def run_sent(api: Api, guard: JobGuard, body: Body) -> list[Any]:
    """Lambda runs what the API sent, through the guard."""
    results = [deliver(guard, parse_tick(event), body) for _, event in api.sent]
    api.sent.clear()
    return results


class TestPause:
    def test_a_paused_job_records_its_deliveries_paused_and_runs_nothing(
        self, api: Api, make_guard: GuardFactory, store: RunStore
    ) -> None:
        status, state = api("POST", "/jobs/cleanup/pause", {"reason": "migrating the DB"})
        assert status == 200
        assert state["pause"] == {
            "by": OPERATOR,
            "reason": "migrating the DB",
            "since": "2026-11-22T12:02:00.000Z",
            "until": None,
        }
        guard, body = make_guard(), Body()
        result = deliver(guard, tick_at(TICK + timedelta(minutes=5)), body)
        assert result.outcome is Outcome.PAUSED
        assert "migrating the DB" in result.reason
        assert (
            deliver(guard, tick_at(TICK + timedelta(minutes=5)), body).outcome is Outcome.DUPLICATE
        )
        assert body.calls == []
        [record] = store.history("cleanup")
        assert record.status is RunStatus.PAUSED
        head = store.head("cleanup")
        assert head is not None and head.pause_reason == "migrating the DB"

    def test_resume_ends_the_pause_and_the_next_tick_runs(
        self, api: Api, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        api("POST", "/jobs/cleanup/pause", {"reason": "maintenance"})
        assert api("POST", "/jobs/cleanup/resume")[0] == 200
        assert api("GET", "/jobs/cleanup")[1]["paused"] is False
        body = Body()
        assert deliver(make_guard(), tick_at(NOW), body).outcome is Outcome.SUCCEEDED
        status, error = api("POST", "/jobs/cleanup/resume")
        assert (status, error["error"]) == (409, "not_paused")

    def test_a_pause_ends_by_itself_at_until_even_between_two_deliveries_of_a_tick(
        self, api: Api, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        until = NOW + timedelta(seconds=30)
        api("POST", "/jobs/cleanup/pause", {"reason": "short", "until": until.isoformat()})
        guard, body = make_guard(), Body()
        tick = tick_at(NOW)
        clock.set(until - timedelta(seconds=1))
        assert deliver(guard, tick, body).outcome is Outcome.PAUSED
        clock.set(until + timedelta(seconds=1))
        # The tick was decided while paused: a later copy is a duplicate, not a second chance.
        assert deliver(guard, tick, body).outcome is Outcome.DUPLICATE
        # The next tick runs: the pause is over with no resume.
        assert (
            deliver(guard, tick_at(NOW + timedelta(minutes=5)), body).outcome is Outcome.SUCCEEDED
        )
        assert len(body.calls) == 1

    def test_a_run_in_progress_when_the_job_is_paused_finishes_normally(
        self, api: Api, make_guard: GuardFactory
    ) -> None:
        body = Body(during=lambda run: api("POST", "/jobs/cleanup/pause", {"reason": "now"}))
        assert deliver(make_guard(), tick_at(NOW), body).outcome is Outcome.SUCCEEDED

    @pytest.mark.parametrize(
        ("request_body", "code"),
        [
            ({"reason": "  "}, "invalid_reason"),
            ({}, "invalid_reason"),
            ({"reason": "x", "until": "2026-11-22T12:00:00Z"}, "invalid_until"),
            ({"reason": "x", "until": "tomorrow"}, "invalid_until"),
        ],
    )
    def test_bad_pauses_are_422_naming_the_field_and_write_nothing(
        self, api: Api, store: RunStore, request_body: dict[str, str], code: str
    ) -> None:
        status, error = api("POST", "/jobs/cleanup/pause", request_body)
        assert (status, error["error"]) == (422, code)
        assert store.head("cleanup") is None


class TestRun:
    def test_run_now_is_202_with_its_own_tick_marked_manual_with_who_asked(
        self, api: Api, make_guard: GuardFactory, store: RunStore
    ) -> None:
        status, accepted = api("POST", "/jobs/cleanup/runs", {})
        assert status == 202
        assert accepted == {"job": "cleanup", "tick": "2026-11-22T12:02:00.000Z", "trigger": "now"}
        [(function, _)] = api.sent
        assert function == "fn-cleanup"
        [result] = run_sent(api, make_guard(), Body())
        assert result.outcome is Outcome.SUCCEEDED
        [record] = store.history("cleanup")
        assert (record.tick, record.trigger, record.requested_by) == (
            accepted["tick"],
            "now",
            OPERATOR,
        )
        status, polled = api("GET", f"/jobs/cleanup/runs/{accepted['tick']}")
        assert (status, polled["status"], polled["final"]) == (200, "SUCCEEDED", True)

    def test_run_at_a_missed_tick_runs_it_once_more_and_never_a_second_success(
        self, api: Api, make_guard: GuardFactory, clock: ManualClock, store: RunStore
    ) -> None:
        guard, body = make_guard(), Body()
        clock.set(TICK + timedelta(minutes=6))  # later than max_lateness: MISSED
        assert deliver(guard, tick_at(TICK), body).outcome is Outcome.MISSED
        for _ in range(2):
            assert api("POST", "/jobs/cleanup/runs", {"at": "2026-11-22T12:00:00Z"})[0] == 202
        outcomes = [r.outcome for r in run_sent(api, guard, body)]
        assert outcomes == [Outcome.SUCCEEDED, Outcome.DUPLICATE]
        assert len(body.calls) == 1
        assert store.history("cleanup")[0].trigger == "at"

    def test_run_now_racing_a_scheduled_delivery_of_the_same_tick_runs_it_once(
        self, api: Api, make_guard: GuardFactory
    ) -> None:
        """The operator re-runs tick T while the scheduler's delivery of T is running."""
        guard, body = make_guard(overlap=Overlap.ALLOW), Body()

        def operator_asks(_run: Any) -> None:
            api("POST", "/jobs/cleanup/runs", {"at": "2026-11-22T12:00:00Z"})
            [result] = run_sent(api, guard, Body())
            assert result.outcome is Outcome.DUPLICATE

        scheduled = Body(during=operator_asks)
        assert deliver(guard, tick_at(TICK), scheduled).outcome is Outcome.SUCCEEDED
        api("POST", "/jobs/cleanup/runs", {"at": "2026-11-22T12:00:00Z"})
        assert [r.outcome for r in run_sent(api, guard, body)] == [Outcome.DUPLICATE]
        assert len(scheduled.calls) == 1 and body.calls == []

    def test_run_now_with_overlap_allow_runs_beside_a_live_tick_of_a_skip_job(
        self, api: Api, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        guard = make_guard(overlap=Overlap.SKIP)
        inner: list[Any] = []

        def operator_asks(_run: Any) -> None:
            api("POST", "/jobs/cleanup/runs", {})
            clock.advance(1)
            api("POST", "/jobs/cleanup/runs", {"overlap": "allow"})
            inner.extend(run_sent(api, guard, Body()))

        deliver(guard, tick_at(TICK), Body(during=operator_asks))
        assert [r.outcome for r in inner] == [Outcome.SKIPPED, Outcome.SUCCEEDED]

    @pytest.mark.parametrize(
        ("path", "request_body", "status", "code"),
        [
            ("/jobs/nope/runs", {}, 404, "job_not_found"),
            ("/jobs/cleanup/runs", {"at": "2026-11-22T12:01:00Z"}, 422, "invalid_at"),
            ("/jobs/cleanup/runs", {"at": "2026-11-22T13:00:00Z"}, 422, "invalid_at"),
            ("/jobs/cleanup/runs", {"at": "2026-01-01T00:00:00Z"}, 422, "invalid_at"),
            ("/jobs/cleanup/runs", {"overlap": "skip"}, 422, "invalid_overlap"),
            ("/jobs/cleanup/pause", {"reason": "x"}, 200, None),
        ],
    )
    def test_bad_runs_are_refused_and_send_nothing(
        self, api: Api, path: str, request_body: dict[str, str], status: int, code: str | None
    ) -> None:
        answer, body = api("POST", path, request_body)
        assert answer == status
        if code:
            assert body["error"] == code
        assert api.sent == []

    def test_a_paused_job_refuses_manual_runs(self, api: Api) -> None:
        api("POST", "/jobs/cleanup/pause", {"reason": "x"})
        status, error = api("POST", "/jobs/cleanup/runs", {})
        assert (status, error["error"]) == (409, "job_paused")
        assert api.sent == []


class TestBackfill:
    def test_plan_lists_expected_ticks_without_success_and_racing_the_schedule_runs_each_once(
        self, api: Api, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        guard, live = make_guard(), Body()
        clock.set(TICK - timedelta(minutes=10) + timedelta(seconds=1))
        deliver(guard, tick_at(TICK - timedelta(minutes=10)), live)  # SUCCEEDED
        clock.set(TICK + timedelta(seconds=1))
        status, plan = api(
            "GET",
            "/jobs/cleanup/backfill",
            **{"from": "2026-11-22T11:45:00Z", "to": "2026-11-22T12:00:00Z"},
        )
        assert status == 200
        assert plan["expected"] == 4
        ticks = [t["tick"] for t in plan["ticks"]]
        assert ticks == ["2026-11-22T11:45:00Z", "2026-11-22T11:55:00Z", "2026-11-22T12:00:00Z"]
        # The live delivery of 12:00 runs while the backfill sends the same tick.
        backfilled = Body()

        def backfill_runs(_run: Any) -> None:
            for tick in ticks:
                api(
                    "POST", "/jobs/cleanup/runs", {"at": tick, "backfill": True, "overlap": "allow"}
                )
            run_sent(api, guard, backfilled)

        assert (
            deliver(guard, tick_at(TICK), Body(during=backfill_runs)).outcome is Outcome.SUCCEEDED
        )
        assert sorted(r.scheduled_at.strftime("%H:%M") for r in backfilled.calls) == [
            "11:45",
            "11:55",
        ]
        status, again = api(
            "GET",
            "/jobs/cleanup/backfill",
            **{"from": "2026-11-22T11:45:00Z", "to": "2026-11-22T12:00:00Z"},
        )
        assert again["ticks"] == []

    @pytest.mark.parametrize(
        ("start", "end", "code"),
        [
            ("2026-11-22T12:00:00Z", "2026-11-22T13:00:00Z", "invalid_to"),
            ("2026-11-23T12:00:00Z", "2026-11-24T13:00:00Z", "invalid_from"),
            ("2026-09-01T00:00:00Z", "2026-11-22T12:00:00Z", "invalid_from"),
            ("2026-11-22T12:00:00Z", "2026-11-22T11:00:00Z", "invalid_to"),
        ],
    )
    def test_bad_ranges_are_422_naming_the_field(
        self, api: Api, start: str, end: str, code: str
    ) -> None:
        status, error = api("GET", "/jobs/cleanup/backfill", **{"from": start, "to": end})
        assert (status, error["error"]) == (422, code)


class TestAudit:
    def test_ticks_never_delivered_are_recorded_missed_across_a_dst_change(
        self,
        dynamodb: Any,
        runs_table: str,
        clock: ManualClock,
        store: RunStore,
        make_guard: GuardFactory,
    ) -> None:
        """Half-hourly in Prague over the night clocks go back: 02:00 and 02:30 fire once."""
        job = spec("report", "cron(*/30 * * * ? *)", "Europe/Prague")
        control, runs = ControlStore(dynamodb, runs_table), RunStore(dynamodb, runs_table)
        clock.set(datetime(2026, 10, 24, 23, 0, tzinfo=UTC))
        assert audit({"report": job}, control, runs, clock()) == []  # first sight: starts counting
        guard = make_guard(job="report")
        clock.set(datetime(2026, 10, 24, 23, 30, 5, tzinfo=UTC))
        deliver(guard, tick_at(datetime(2026, 10, 24, 23, 30, tzinfo=UTC), "report"), Body())
        # The schedule stops firing; the audit's passes go on every 30 minutes.
        found = []
        for moment in ("00:35", "01:05", "01:35", "02:05"):
            hour, minute = map(int, moment.split(":"))
            clock.set(datetime(2026, 10, 25, hour, minute, tzinfo=UTC))
            found += audit({"report": job}, control, runs, clock())
        assert [f.tick for f in found] == [
            "2026-10-25T00:00:00Z",  # 02:00 CEST
            "2026-10-25T00:30:00Z",  # 02:30 CEST; 02:00 and 02:30 CET (01:00, 01:30 UTC) repeat
            "2026-10-25T02:00:00Z",  # 03:00 CET
        ]
        records = {r.tick: r for r in store.history("report")}
        for finding in found:
            assert records[finding.tick].status is RunStatus.MISSED
            assert records[finding.tick].detail == NEVER_DELIVERED
        assert "2026-10-24T23:00:00Z" not in records  # before the audit knew the job
        assert audit({"report": job}, control, runs, clock()) == []  # idempotent

    def test_paused_periods_are_not_counted(
        self, dynamodb: Any, runs_table: str, clock: ManualClock, api: Api
    ) -> None:
        control, runs = ControlStore(dynamodb, runs_table), RunStore(dynamodb, runs_table)
        jobs = {"cleanup": spec()}
        clock.set(TICK - timedelta(minutes=30))
        audit(jobs, control, runs, clock())
        api("POST", "/jobs/cleanup/pause", {"reason": "holiday"})
        clock.set(TICK - timedelta(minutes=12))
        api("POST", "/jobs/cleanup/resume")
        clock.set(TICK + timedelta(minutes=3))
        found = [f.tick[11:16] for f in audit(jobs, control, runs, clock())]
        # 11:30 ... 12:00 were expected; 11:30-11:45 fall in the pause (11:30 to 11:48).
        assert found == ["11:50", "11:55", "12:00"]


def test_a_run_longer_than_max_duration_is_flagged_in_its_record(
    make_guard: GuardFactory, clock: ManualClock, store: RunStore
) -> None:
    guard = make_guard(max_duration=timedelta(seconds=10), min_duration=timedelta(seconds=1))
    clock.set(TICK)
    slow = deliver(guard, tick_at(TICK), Body(during=lambda run: clock.advance(11)))
    fast = deliver(guard, tick_at(TICK + timedelta(minutes=5)), Body())
    assert (slow.duration_flag, fast.duration_flag) == ("TOO_LONG", "TOO_SHORT")
    flags = {r.tick: r.duration_flag for r in store.history("cleanup")}
    assert flags == {"2026-11-22T12:00:00Z": "TOO_LONG", "2026-11-22T12:05:00Z": "TOO_SHORT"}


# --- defects found by the adversarial review, each reproduced before its fix ---------------


def test_backfill_of_a_missed_tick_while_the_live_tick_runs_is_skipped_not_an_error(
    api: Api, make_guard: GuardFactory, clock: ManualClock, store: RunStore
) -> None:
    """Backfill racing the live schedule under the default ``skip`` policy: the backfilled tick
    (recorded MISSED) meets the live tick's lease. It should be SKIPPED (runnable again later);
    instead record_final's ``_reclaimable`` refuses to overwrite MISSED, the guard loops and raises
    ClaimContention, Lambda retries and dead-letters it, and the CLI waits until its timeout."""
    guard = make_guard()
    clock.set(TICK - timedelta(minutes=5) + timedelta(minutes=10))  # 5 min late: MISSED
    assert deliver(guard, tick_at(TICK - timedelta(minutes=5)), Body()).outcome is Outcome.MISSED
    clock.set(TICK + timedelta(seconds=1))
    outcomes = []

    def backfill_meanwhile(_run: Any) -> None:
        request = {"at": "2026-11-22T11:55:00Z", "backfill": True}
        status, _ = api("POST", "/jobs/cleanup/runs", request)
        assert status == 202
        outcomes.extend(r.outcome for r in run_sent(api, guard, Body()))

    live = deliver(guard, tick_at(TICK), Body(during=backfill_meanwhile))
    assert live.outcome is Outcome.SUCCEEDED
    assert outcomes == [Outcome.SKIPPED]


def test_a_time_zone_change_restarts_the_audit_like_an_expression_change(
    dynamodb: Any, runs_table: str, clock: ManualClock, make_guard: GuardFactory
) -> None:
    """``mark_audited`` keys the audit's start on the expression only: moving a job from
    Europe/Paris to UTC (same expression) keeps the old start, so the new zone's tick that fell
    before the redeploy is recorded MISSED "never delivered"."""
    control, runs = ControlStore(dynamodb, runs_table), RunStore(dynamodb, runs_table)
    paris = {"cleanup": spec(schedule="cron(0 9 * * ? *)", tz="Europe/Paris")}
    clock.set(datetime(2026, 11, 22, 6, 0, tzinfo=UTC))
    audit(paris, control, runs, clock())  # first sight
    clock.set(datetime(2026, 11, 22, 8, 0, 5, tzinfo=UTC))  # 09:00 in Paris, delivered
    deliver(make_guard(), tick_at(datetime(2026, 11, 22, 8, 0, tzinfo=UTC)), Body())
    # Redeployed at 09:10Z with time_zone="UTC": its first tick is tomorrow 09:00Z.
    utc = {"cleanup": spec(schedule="cron(0 9 * * ? *)", tz="UTC")}
    clock.set(datetime(2026, 11, 22, 9, 10, tzinfo=UTC))
    assert audit(utc, control, runs, clock()) == []


def test_a_failed_run_longer_than_max_duration_emits_the_too_long_metric(
    monkeypatch: pytest.MonkeyPatch,
    runs_table: str,
    dynamodb: Any,
    clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``duration_flag`` flags a too-long run "whatever its outcome" and the guard writes the flag
    into a FAILED record, but the decorator emits JobRunTooLong only on the success path: a run
    that hangs for too long and then fails (the usual case) never reaches the alarm."""

    from tests.helpers.jobs import context
    from vigil.jobs import scheduled_job

    monkeypatch.setenv("VIGIL_JOB_NAME", "cleanup")
    monkeypatch.setenv("VIGIL_RUNS_TABLE", runs_table)
    monkeypatch.setenv("VIGIL_MAX_LATENESS_SECONDS", "120")
    monkeypatch.setenv("VIGIL_MAX_DURATION_SECONDS", "10")
    clock.set(TICK)

    def body(run: Any) -> None:
        clock.advance(11)
        raise TimeoutError("downstream hung")

    handler = scheduled_job(body, client=dynamodb, clock=clock)
    event = {"vigil": {"job": "cleanup", "scheduled_time": "2026-11-22T12:00:00Z"}}
    with pytest.raises(TimeoutError):
        handler(event, context())
    [record] = RunStore(dynamodb, runs_table).history("cleanup")
    assert record.duration_flag == "TOO_LONG"  # the record is flagged...
    out = capsys.readouterr().out
    names = [
        metric["Name"]
        for line in out.splitlines()
        if '"_aws"' in line
        for metric in json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    ]
    assert "JobRunTooLong" in names  # ...but the metric (and so the alarm) is not


def _raw(api: Api, method: str, path: str, raw_body: str | None) -> tuple[int, Any]:

    event = rest_event(
        method,
        path,
        headers={"Content-Type": "application/json"},
        body=raw_body,
        caller_arn="arn:aws:iam::123456789012:user/operator",
    )
    answer = api.app.resolve(event, LambdaContext())
    return int(answer["statusCode"]), json.loads(answer["body"] or "null")


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/jobs/cleanup/pause", '{"reason": "x", "until": "0001-01-01T00:00:00+01:00"}'),
        ("/jobs/cleanup/pause", '{"reason": "x", "until": "9999-12-31T23:59:59-01:00"}'),
        ("/jobs/cleanup/runs", '{"at": "0001-01-01T00:30:00+01:00"}'),
    ],
)
def test_times_out_of_datetime_range_are_422_not_a_500(
    api: Api, store: RunStore, path: str, raw: str
) -> None:
    """``parse_time`` catches ValueError, but ``astimezone(UTC)`` of a time at the edge of
    datetime's range raises OverflowError: an unhandled exception (500) instead of a 422."""
    status, _ = _raw(api, "POST", path, raw)
    assert status == 422, status
    assert store.head("cleanup") is None and api.sent == []


# --- the gaps left open at the last stop, each reproduced before its fix -----------------------


def test_re_pausing_a_paused_job_keeps_when_the_pause_began(
    dynamodb: Any, runs_table: str, clock: ManualClock, api: Api
) -> None:
    """Changing a pause's reason or end used to overwrite ``paused_since``: the first part of the
    pause was then audited as never delivered."""
    control, runs = ControlStore(dynamodb, runs_table), RunStore(dynamodb, runs_table)
    jobs = {"cleanup": spec()}
    clock.set(TICK - timedelta(minutes=30))
    audit(jobs, control, runs, clock())
    api("POST", "/jobs/cleanup/pause", {"reason": "upstream down"})
    clock.set(TICK - timedelta(minutes=20))
    status, body = api("POST", "/jobs/cleanup/pause", {"reason": "still down, vendor ticket 42"})
    assert status == 200
    assert body["pause"]["since"] == "2026-11-22T11:30:00.000Z"
    assert body["pause"]["reason"] == "still down, vendor ticket 42"
    clock.set(TICK - timedelta(minutes=12))
    api("POST", "/jobs/cleanup/resume")
    clock.set(TICK + timedelta(minutes=3))
    assert [f.tick[11:16] for f in audit(jobs, control, runs, clock())] == [
        "11:50",
        "11:55",
        "12:00",
    ]


def test_every_pause_in_the_audit_window_is_skipped_not_only_the_latest(
    dynamodb: Any, runs_table: str, clock: ManualClock, api: Api
) -> None:
    control, runs = ControlStore(dynamodb, runs_table), RunStore(dynamodb, runs_table)
    jobs = {"cleanup": spec()}
    clock.set(TICK - timedelta(minutes=50))
    audit(jobs, control, runs, clock())
    for start, end in ((45, 36), (25, 16)):  # 11:15-11:24 and 11:35-11:44 paused
        clock.set(TICK - timedelta(minutes=start))
        assert api("POST", "/jobs/cleanup/pause", {"reason": "maintenance"})[0] == 200
        clock.set(TICK - timedelta(minutes=end))
        assert api("POST", "/jobs/cleanup/resume")[0] == 200
    clock.set(TICK + timedelta(minutes=3))
    found = [f.tick[11:16] for f in audit(jobs, control, runs, clock())]
    assert found == ["11:25", "11:30", "11:45", "11:50", "11:55", "12:00"]


def test_an_empty_until_is_refused_not_read_as_a_pause_without_end(api: Api) -> None:
    status, error = api("POST", "/jobs/cleanup/pause", {"reason": "x", "until": ""})
    assert (status, error["error"]) == (422, "invalid_until")
    status, body = api("GET", "/jobs")
    assert body["jobs"][0]["paused"] is False


def test_one_job_that_cannot_be_audited_does_not_hide_another_jobs_missing_ticks(
    dynamodb: Any, runs_table: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    control, runs = ControlStore(dynamodb, runs_table), RunStore(dynamodb, runs_table)
    jobs = {"broken": spec("broken"), "cleanup": spec()}
    clock.set(TICK - timedelta(minutes=30))
    audit(jobs, control, runs, clock())
    real = control.statuses

    def statuses(job: str, first: str, last: str) -> dict[str, str]:
        if job == "broken":
            raise RuntimeError("throttled")
        return real(job, first, last)

    monkeypatch.setattr(control, "statuses", statuses)
    clock.set(TICK + timedelta(minutes=3))
    with pytest.raises(AuditIncomplete) as raised:
        audit(jobs, control, runs, clock())
    assert list(raised.value.failures) == ["broken"]
    assert "broken" in str(raised.value) and "throttled" in str(raised.value)
    assert {f.job for f in raised.value.findings} == {"cleanup"}
    records = {r.tick: r.status for r in runs.history("cleanup")}
    assert records["2026-11-22T12:00:00Z"] is RunStatus.MISSED


def test_two_operators_pausing_at_once_cannot_lose_the_pause_start(
    dynamodb: Any, runs_table: str, clock: ManualClock
) -> None:
    """The pause is written conditioned on the pause read: a stale writer gets a clear 409."""
    control = ControlStore(dynamodb, runs_table)
    clock.set(TICK)
    control.pause("cleanup", pause_terms("first", None, clock()), OPERATOR, timedelta(days=1))
    stale = control._head  # the second operator read before the first one's change

    def read_before(job: str) -> Any:
        return None

    control._head = read_before  # type: ignore[method-assign]
    with pytest.raises(PauseChanged):
        control.pause("cleanup", pause_terms("second", None, clock()), OPERATOR, timedelta(1))
    control._head = stale  # type: ignore[method-assign]
    head = control._head("cleanup")
    assert head is not None and head.pause_reason == "first"


@pytest.mark.parametrize("expression", ["cron(0 22-2 * * ? *)", "cron(0 9 ? * FRI-MON *)"])
def test_a_range_that_wraps_around_is_refused_with_the_spelling_that_works(
    expression: str,
) -> None:
    with pytest.raises(InvalidSchedule, match="wraps around: write it as"):
        Schedule(expression).next_after(TICK, 1)


def test_a_failed_attempt_lambda_will_retry_is_not_final_and_wait_keeps_polling(
    api: Api, make_guard: GuardFactory
) -> None:
    """``--wait`` used to stop at the first FAILED attempt and exit 1 while Lambda retried the
    run (and the retry succeeded)."""
    guard, body = make_guard(), Body(fail=1)
    status, accepted = api("POST", "/jobs/cleanup/runs", {})
    assert status == 202
    event = api.sent[0][1]
    seen: list[dict[str, Any]] = []

    def call(method: str, path: str, body: Any = None) -> Any:
        status, answer = api(method, path, body)
        if status != 200:
            raise ApiError(status, answer["error"], answer["message"])
        seen.append(answer)
        return answer

    with pytest.raises(RuntimeError, match="boom"):  # attempt 1 fails; Lambda will retry it
        deliver(guard, parse_tick(event), body)
    retried: list[float] = []

    def sleep(seconds: float) -> None:  # Lambda's retry lands while the CLI waits
        retried.append(seconds)
        deliver(guard, parse_tick(event), body)

    record = wait_for(call, "cleanup", accepted["tick"], timeout=60, sleep=sleep)
    assert (seen[0]["status"], seen[0]["final"], seen[0]["retries_left"]) == ("FAILED", False, 2)
    assert record["status"] == "SUCCEEDED" and len(retried) == 1


def test_a_retried_run_request_with_the_same_idempotency_key_starts_one_run(
    dynamodb: Any, runs_table: str, clock: ManualClock
) -> None:
    """Without a key, a client that retries a POST after a timeout starts a second manual run."""
    clock.set(NOW)
    api = Api(dynamodb, runs_table, clock, {"cleanup": spec()}, keyed=True)
    first = api("POST", "/jobs/cleanup/runs", {}, headers={"Idempotency-Key": "k1"})
    clock.advance(1)
    again = api("POST", "/jobs/cleanup/runs", {}, headers={"Idempotency-Key": "k1"})
    assert first == again and first[0] == 202
    assert len(api.sent) == 1
    other = api(
        "POST", "/jobs/cleanup/runs", {"overlap": "allow"}, headers={"Idempotency-Key": "k1"}
    )
    assert (other[0], other[1]["error"]) == (422, "idempotency_key_reused")
    assert api("POST", "/jobs/cleanup/runs", {}, headers={"Idempotency-Key": "k2"})[0] == 202
    assert len(api.sent) == 2


# --- found by the adversarial review of the gaps' fixes, each reproduced before its fix --------


def _caller(api: Api) -> Any:
    def call(method: str, path: str, body: Any = None) -> Any:
        status, answer = api(method, path, body)
        if status >= 300:
            raise ApiError(status, answer["error"], answer["message"])
        return answer

    return call


def test_wait_on_a_rerun_of_a_failed_tick_does_not_stop_at_its_first_failed_attempt(
    api: Api, make_guard: GuardFactory
) -> None:
    """The rerun of a tick that failed 3 times is a new invocation with its own retries:
    ``retries_left`` used to count the tick's attempts since it was first scheduled (0 left)."""
    guard, body = make_guard(), Body(fail=4)
    for _ in range(3):  # the scheduled delivery and Lambda's 2 retries all fail
        with pytest.raises(RuntimeError, match="boom"):
            deliver(guard, tick_at(TICK), body)
    call = _caller(api)
    before = call("GET", "/jobs/cleanup/runs/2026-11-22T12:00:00Z")
    assert (before["status"], before["retries_left"], before["attempts"]) == ("FAILED", 0, 3)
    call("POST", "/jobs/cleanup/runs", {"at": "2026-11-22T12:00:00Z"})
    [(_, event)] = api.sent
    with pytest.raises(RuntimeError, match="boom"):  # the rerun's first attempt fails
        deliver(guard, parse_tick(event), body)
    retried: list[float] = []

    def sleep(seconds: float) -> None:  # Lambda retries the failed rerun while the CLI waits
        retried.append(seconds)
        deliver(guard, parse_tick(event), body)

    record = wait_for(call, "cleanup", "2026-11-22T12:00:00Z", 60, sleep, before)
    assert record["status"] == "SUCCEEDED" and record["attempts"] == 5 and len(retried) == 1


def test_a_pause_until_within_retention_of_the_end_of_time_is_answered_not_a_500(
    api: Api,
) -> None:
    status, body = api(
        "POST", "/jobs/cleanup/pause", {"reason": "forever", "until": "9999-12-30T00:00:00Z"}
    )
    assert status == 200 and body["paused"] is True


def test_a_failed_tick_whose_retries_would_arrive_too_late_has_no_retries_left(
    api: Api, make_guard: GuardFactory, clock: ManualClock
) -> None:
    """Lambda's retries of a scheduled tick after ``max_lateness`` are refused as too late and
    never run: the record must not promise them (``--wait`` would wait out its timeout)."""
    guard, body = make_guard(max_lateness=timedelta(minutes=2)), Body(fail=1)
    with pytest.raises(RuntimeError, match="boom"):
        deliver(guard, tick_at(TICK), body)  # 12:02, within max_lateness: attempt 1 fails
    status, record = api("GET", "/jobs/cleanup/runs/2026-11-22T12:00:00Z")
    assert (status, record["retries_left"], record["final"]) == (200, 2, False)  # would run
    clock.set(TICK + timedelta(minutes=2, seconds=1))  # any retry from now on is refused
    status, record = api("GET", "/jobs/cleanup/runs/2026-11-22T12:00:00Z")
    assert (status, record["retries_left"], record["final"]) == (200, 0, True)


def test_an_audit_finding_for_an_older_tick_does_not_move_the_head_back(
    dynamodb: Any, runs_table: str, clock: ManualClock, make_guard: GuardFactory, store: RunStore
) -> None:
    """``record_final`` used to write the head's last_* unconditionally: ``vigil jobs list``
    then showed the audit's older MISSED tick as the job's latest."""
    control, runs = ControlStore(dynamodb, runs_table), RunStore(dynamodb, runs_table)
    jobs = {"cleanup": spec()}
    clock.set(TICK - timedelta(minutes=12))
    audit(jobs, control, runs, clock())
    clock.set(TICK + timedelta(seconds=5))
    deliver(make_guard(), tick_at(TICK), Body())  # 12:00 delivered; 11:50 and 11:55 never were
    clock.set(TICK + timedelta(minutes=3))
    assert [f.tick[11:16] for f in audit(jobs, control, runs, clock())] == ["11:50", "11:55"]
    head = store.head("cleanup")
    assert head is not None
    assert (head.last_tick, head.last_status) == ("2026-11-22T12:00:00Z", RunStatus.SUCCEEDED)
    records = {r.tick: r.status for r in store.history("cleanup")}
    assert records["2026-11-22T11:55:00Z"] is RunStatus.MISSED


def _cli(api: Api, *argv: str) -> tuple[int, str]:
    """``vigil jobs ...`` parsed as the CLI parses it, sent through the API harness."""
    from vigil_tools.cli import build_parser

    def call(method: str, path: str, **kwargs: Any) -> Any:
        status, answer = api(method, path, kwargs.get("body"), headers=kwargs.get("headers"))
        if status >= 300:
            raise ApiError(status, answer["error"], answer["message"])
        return answer

    out = io.StringIO()
    code = run_api_command(build_parser().parse_args(["jobs", *argv]), call, out)
    return code, out.getvalue()


def test_the_cli_sends_its_idempotency_key_and_an_empty_until(
    dynamodb: Any, runs_table: str, clock: ManualClock
) -> None:
    clock.set(NOW)
    api = Api(dynamodb, runs_table, clock, {"cleanup": spec()}, keyed=True)
    for _ in range(2):
        assert _cli(api, "run", "cleanup", "--idempotency-key", "retry-safe")[0] == 0
    assert len(api.sent) == 1
    with pytest.raises(ApiError) as refused:
        _cli(api, "pause", "cleanup", "--reason", "x", "--until", "")
    assert refused.value.code == "invalid_until"


JOB = "/jobs/cleanup"
JOB_REFUSALS = [
    Refusal("GET", "/jobs", "/jobs", query={"status": "BROKEN"}),
    Refusal("GET", "/jobs", "/jobs", query={"limit": "0"}),
    Refusal("GET", "/jobs", "/jobs", query={"limit": "many"}),
    Refusal("GET", "/jobs", "/jobs", query={"next": "not-a-token"}),
    Refusal("GET", "/jobs", "/jobs", query={"prefix": "Bad_"}),
    Refusal("GET", "/jobs/{job}", "/jobs/nope"),
    Refusal("GET", "/jobs/{job}", "/jobs/Bad_Name"),
    Refusal("GET", "/jobs/{job}/backfill", f"{JOB}/backfill", query={"from": "x", "to": "y"}),
    Refusal("GET", "/jobs/{job}/runs/{tick}", f"{JOB}/runs/2026-11-22T11:00:00Z"),
    Refusal("POST", "/jobs/{job}/pause", f"{JOB}/pause", {"reason": "  "}),
    Refusal("POST", "/jobs/{job}/resume", f"{JOB}/resume"),
    Refusal("POST", "/jobs/{job}/runs", f"{JOB}/runs", {"overlap": "skip"}),
    Refusal("POST", "/jobs/{job}/runs", f"{JOB}/runs", {"at": 5}),
    Refusal("POST", "/jobs/{job}/runs", f"{JOB}/runs", {"backfill": "maybe"}),
    Refusal("POST", "/jobs/{job}/runs", f"{JOB}/runs", {}, headers={"Idempotency-Key": "k1"}),
]


def test_every_routes_refusals_use_the_documented_codes(
    dynamodb: Any, runs_table: str, clock: ManualClock
) -> None:
    """One set of codes across the APIs (``vigil.contract.api_errors``), route by route."""
    clock.set(NOW)
    api = Api(dynamodb, runs_table, clock, {"cleanup": spec()}, keyed=True)
    api("POST", f"{JOB}/runs", {"overlap": "allow"}, headers={"Idempotency-Key": "k1"})

    def send(refusal: Refusal) -> tuple[int, Any]:
        return api(refusal.method, refusal.path, refusal.body, refusal.headers, **refusal.query)

    codes = check_refusals(api.app, send, JOB_REFUSALS)
    assert codes == [
        "invalid_status",
        "invalid_limit",
        "invalid_limit",
        "invalid_next",
        "invalid_prefix",
        "job_not_found",
        "invalid_job",
        "invalid_from",
        "tick_not_found",
        "invalid_reason",
        "not_paused",
        "invalid_overlap",
        "invalid_at",
        "invalid_backfill",
        "idempotency_key_reused",
    ]


@pytest.mark.parametrize("standing", ["SUCCEEDED", "UNCERTAIN", "FENCED"])
def test_a_backfill_plans_no_tick_a_rerun_would_find_standing(standing: str) -> None:
    """UNCERTAIN (settle it) and FENCED (superseded) ticks are not rerun, like SUCCEEDED ones:
    planned, each request ended DUPLICATE, the record never changed, and the backfill's
    ``wait_for`` waited out its timeout on every one."""
    first = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    statuses = {"2026-11-22T12:00:00Z": standing, "2026-11-22T12:05:00Z": "FAILED"}
    plan = backfill_plan(spec(), first, first + timedelta(minutes=10), statuses, None)
    assert [key for key, _ in plan.to_run] == ["2026-11-22T12:05:00Z", "2026-11-22T12:10:00Z"]


@pytest.mark.parametrize("standing", ["UNCERTAIN", "FENCED"])
def test_wait_on_a_rerun_of_a_standing_tick_answers_the_record_at_once(standing: str) -> None:
    """``run --at`` of an UNCERTAIN or FENCED tick leaves the record as it was (the rerun is a
    duplicate): that record is the answer, as a SUCCEEDED one is, not a wait to the timeout."""
    record = {"tick": "2026-11-22T12:00:00Z", "status": standing, "retries_left": 0}
    slept: list[float] = []
    got = wait_for(lambda *_a, **_k: record, "cleanup", record["tick"], 60, slept.append, record)
    assert got == record and slept == []
