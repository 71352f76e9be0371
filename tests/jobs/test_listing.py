"""``GET /jobs`` (and ``vigil jobs list``, the same ``vigil.jobs.listing``) at 200 jobs, on moto
with an injected clock: failing first, then late, then paused, then the rest by name; filters by
state and by name prefix; pages that list each job once; one BatchGetItem per 100 jobs a page.

Cost: each test writes 190 heads in 8 batches and reads them back, about a second on moto. The lateness tests are pure (milliseconds).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers.rest import send_json
from vigil.clock import ManualClock, iso
from vigil.contract.jobs import JOB_PK_PREFIX
from vigil.contract.schedule import Schedule
from vigil.dynamo import to_wire
from vigil.jobs.control import OPEN_ENDED_MS, JobSpec
from vigil.jobs.control_api import ControlServices, build_control_app
from vigil.jobs.control_store import ControlStore
from vigil.jobs.events import tick_key
from vigil.jobs.listing import is_late
from vigil.jobs.model import JobHead, RunStatus
from vigil.jobs.store import HEAD_ENTITY, HEAD_SK, RunStore

NOW = datetime(2026, 11, 22, 12, 2, 0, tzinfo=UTC)
JOBS = 200
OPERATOR = "arn:aws:iam::123456789012:user/operator"


def name(index: int) -> str:
    return f"job-{index:03d}"


def spec(job: str, schedule: str = "rate(5 minutes)", lateness: int = 2) -> JobSpec:
    return JobSpec(
        name=job,
        function=f"fn-{job}",
        schedule=Schedule(schedule),
        overlap="skip",
        max_lateness=timedelta(minutes=lateness),
        retention=timedelta(days=30),
    )


def expected_state(index: int) -> str:
    """The fleet below, as an operator should see it."""
    if index >= 190:
        return "NEVER"
    if index % 30 == 5:
        return "PAUSED"
    if index % 20 == 7:
        return "FAILED"
    if index % 50 == 11:
        return "UNCERTAIN"
    if index % 40 == 1:
        return "LATE"
    return "SUCCEEDED"


RANK = {"FAILED": 0, "UNCERTAIN": 0, "LATE": 1, "PAUSED": 2}


def head_item(job: str, state: str) -> dict[str, Any]:
    """A job's head as the guard and the pause leave it (``JobHead.from_item`` reads it back):
    written in one batch, since 190 transactions cost moto about a minute (it copies the table
    on each)."""
    # A late job's last tick is 20 minutes old (3 ticks of 5 minutes past 2 of lateness).
    tick = NOW - timedelta(minutes=22 if state == "LATE" else 2)
    status = state if state in ("FAILED", "UNCERTAIN") else "SUCCEEDED"
    item = {
        "pk": f"{JOB_PK_PREFIX}{job}",
        "sk": HEAD_SK,
        "entity": HEAD_ENTITY,
        "job": job,
        "fence": 1,
        "last_tick": tick_key(tick),
        "last_status": status,
        "last_finished_at": iso(tick),
    }
    if state == "PAUSED":
        item |= {
            "paused_by": OPERATOR,
            "pause_reason": "maintenance",
            "paused_since": iso(NOW - timedelta(minutes=30)),
            "paused_until_ms": OPEN_ENDED_MS,
        }
    return item


@pytest.fixture
def fleet(dynamodb: Any, runs_table: str) -> dict[str, JobSpec]:
    """200 jobs: 10 never ran, 7 paused, 10 failed, 4 uncertain, 4 late, the rest succeeded."""
    jobs = {name(i): spec(name(i)) for i in range(JOBS)}
    items = [head_item(name(i), expected_state(i)) for i in range(JOBS) if i < 190]
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": to_wire(item)}} for item in items[start : start + 25]]
        dynamodb.batch_write_item(RequestItems={runs_table: batch})
    return jobs


class Api:
    def __init__(self, dynamodb: Any, table: str, jobs: dict[str, JobSpec]) -> None:
        self.requests: Counter[str] = Counter()
        dynamodb.meta.events.register("before-call.dynamodb.*", self._count)
        services = ControlServices(
            jobs=jobs,
            control=ControlStore(dynamodb, table),
            runs=RunStore(dynamodb, table),
            invoke=lambda function, event: None,
            clock=ManualClock(NOW),
        )
        self.app = build_control_app(services)

    def _count(self, model: Any, **_: Any) -> None:
        self.requests[model.name] += 1

    def __call__(self, **query: str) -> tuple[int, Any]:
        return send_json(self.app.resolve, "GET", "/jobs", None, query=query)

    def walk(self, **query: str) -> list[list[dict[str, Any]]]:
        pages = []
        while True:
            status, body = self(**query)
            assert status == 200, body
            pages.append(body["jobs"])
            if not body["next"]:
                return pages
            query["next"] = body["next"]


@pytest.fixture
def api(dynamodb: Any, runs_table: str, fleet: dict[str, JobSpec]) -> Api:
    return Api(dynamodb, runs_table, fleet)


def test_every_page_of_200_jobs_failing_first_each_job_once_one_request_a_page(api: Api) -> None:
    pages = api.walk(limit="37")
    listed = [job for page in pages for job in page]
    assert [len(p) for p in pages] == [37] * 5 + [15]
    order = sorted(range(JOBS), key=lambda i: (RANK.get(expected_state(i), 3), name(i)))
    assert [job["job"] for job in listed] == [name(i) for i in order]
    assert [job["state"] for job in listed] == [expected_state(i) for i in order]
    # The heads, each page: one BatchGetItem per 100 jobs (those of no other job are not read).
    assert api.requests == Counter({"BatchGetItem": 2 * len(pages)})
    paused = next(job for job in listed if job["state"] == "PAUSED")
    assert paused["pause"]["reason"] == "maintenance" and paused["late"] is False


def test_filters_by_state_and_by_prefix(api: Api) -> None:
    def names(**query: str) -> list[str]:
        return [job["job"] for page in api.walk(**query) for job in page]

    failing = [name(i) for i in range(JOBS) if expected_state(i) in ("FAILED", "UNCERTAIN")]
    assert names(status="failing") == sorted(failing)
    assert names(status="uncertain") == ["job-011", "job-061", "job-111", "job-161"]
    late_or_paused = names(status="LATE,paused")
    assert [expected_state(int(n[4:])) for n in late_or_paused] == ["LATE"] * 4 + ["PAUSED"] * 7
    assert names(status="never") == [name(i) for i in range(190, 200)]
    under = names(prefix="job-1", status="FAILED")
    assert under == [name(i) for i in range(100, 200) if expected_state(i) == "FAILED"]
    assert api(prefix="job-2")[1]["jobs"] == []


def test_a_prefix_reads_only_the_jobs_it_names(api: Api) -> None:
    status, body = api(prefix="job-18", limit="500")
    assert status == 200 and [job["job"] for job in body["jobs"]][-1] == "job-189"
    assert api.requests == Counter({"BatchGetItem": 1})  # 10 keys, those of job-180..189


@pytest.mark.parametrize(
    ("query", "code", "says"),
    [
        ({"status": "BROKEN"}, "invalid_status", "unknown BROKEN; one or more of RUNNING"),
        ({"limit": "0"}, "invalid_limit", "limit"),
        ({"limit": "501"}, "invalid_limit", "limit"),
        ({"next": "garbage"}, "invalid_next", "not a page token"),
        ({"prefix": "Job"}, "invalid_prefix", "'Job' starts no valid name"),
    ],
)
def test_bad_filters_limits_and_tokens_are_refused_naming_the_field(
    api: Api, query: dict[str, str], code: str, says: str
) -> None:
    status, body = api(**query)
    assert (status, body["error"]) == (422, code)
    assert says in body["message"]


def test_a_token_is_refused_with_other_filters(api: Api) -> None:
    token = api(status="failing", limit="5")[1]["next"]
    status, body = api(status="late", limit="5", next=token)
    assert (status, body["error"]) == (422, "invalid_next")
    assert "list again from the first page" in body["message"]


# --- lateness, pure ----------------------------------------------------------------------------


def head(last_tick: datetime | None) -> JobHead:
    return JobHead(
        job="j",
        fence=1,
        lease_tick=None,
        lease_until=None,
        last_tick=tick_key(last_tick) if last_tick else None,
        last_status=RunStatus.SUCCEEDED if last_tick else None,
        last_finished_at=None,
        last_error=None,
    )


def test_late_is_a_tick_past_its_lateness_with_no_record() -> None:
    rate = spec("j", "rate(5 minutes)", lateness=2)
    last = NOW - timedelta(minutes=6)
    assert not is_late(rate, head(last), NOW)  # the next tick (-1 min) may still come
    assert is_late(rate, head(last), NOW + timedelta(minutes=1, seconds=1))
    assert not is_late(rate, head(None), NOW)  # never ran: nothing to count from
    daily = spec("j", "cron(0 3 * * ? *)", lateness=10)
    yesterday = datetime(2026, 11, 21, 3, 0, tzinfo=UTC)
    assert not is_late(daily, head(yesterday), datetime(2026, 11, 22, 3, 9, tzinfo=UTC))
    assert is_late(daily, head(yesterday), datetime(2026, 11, 22, 3, 10, 1, tzinfo=UTC))
    once = spec("j", "at(2026-11-22T10:00:00)")
    assert not is_late(once, head(datetime(2026, 11, 22, 10, 0, tzinfo=UTC)), NOW)
