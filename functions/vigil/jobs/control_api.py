"""The jobs management API: run now, run a tick, pause, resume, plan a backfill.

IAM-authorized like the observers API (same REST API when the app has a fleet); the caller's
identity (``requestContext.identity.userArn``) is recorded on what a request changes. Handlers are
thin: decisions are in ``control.py``, DynamoDB requests in ``control_store.py``, and every
domain error becomes an HTTP answer through ``_DOMAIN_ERRORS`` (``vigil.http_answers``). A refused
request writes nothing and invokes nothing: every check runs before the one write or invocation.

A manual run is sent to the job's function exactly as the scheduler sends a tick (an asynchronous
invocation of the same event format), so the guard decides it: once, fenced, recorded, retried
and dead-lettered like any tick.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer
from pydantic import BaseModel, ConfigDict, Field

from vigil import idempotent_requests
from vigil.clock import Clock, system_clock
from vigil.contract.api_errors import INVALID_FIELD, ErrorCode
from vigil.contract.jobs import JOB_NAME
from vigil.http_answers import (
    answer_unknown_routes,
    caller_of,
    domain_error_response,
    validation_response,
)
from vigil.idempotent_requests import HEADER_DESCRIPTION, KeyedOnce
from vigil.jobs.control import (
    InvalidRequest,
    JobPaused,
    JobSpec,
    NotPaused,
    UnknownJob,
    backfill_plan,
    backfill_range,
    find_job,
    is_paused,
    parse_time,
    pause_terms,
    run_terms,
    scheduled_anchor,
)
from vigil.jobs.control_store import ControlStore, PauseChanged
from vigil.jobs.events import Trigger, tick_key
from vigil.jobs.listing import FILTERS, head_json, jobs_query, list_jobs, row_json
from vigil.jobs.model import FINAL_STATUSES, RunRecord, RunStatus
from vigil.jobs.store import RunStore
from vigil.listing import DEFAULT_LIMIT, MAX_LIMIT, InvalidListing

JOB_RULE = JOB_NAME.pattern
JobName = Annotated[str, Path(pattern=JOB_RULE)]
Invoke = Callable[[str, dict[str, Any]], None]
"""Invoke a job's function asynchronously (``InvocationType=Event``) with an event."""


class TickNotFound(LookupError):
    pass


_DOMAIN_ERRORS: dict[type[Exception], tuple[HTTPStatus, str]] = {
    UnknownJob: (HTTPStatus.NOT_FOUND, ErrorCode.JOB_NOT_FOUND),
    TickNotFound: (HTTPStatus.NOT_FOUND, ErrorCode.TICK_NOT_FOUND),
    InvalidRequest: (HTTPStatus.UNPROCESSABLE_ENTITY, INVALID_FIELD),
    InvalidListing: (HTTPStatus.UNPROCESSABLE_ENTITY, INVALID_FIELD),
    JobPaused: (HTTPStatus.CONFLICT, ErrorCode.JOB_PAUSED),
    NotPaused: (HTTPStatus.CONFLICT, ErrorCode.NOT_PAUSED),
    PauseChanged: (HTTPStatus.CONFLICT, ErrorCode.PAUSE_CHANGED),
    **idempotent_requests.ERRORS,
}


class RunRequest(BaseModel):
    """``POST /jobs/{job}/runs``: nothing for run now; ``at`` for a given tick."""

    model_config = ConfigDict(extra="forbid")

    at: Annotated[str | None, Field(description="A scheduled tick (ISO 8601 with zone)")] = None
    overlap: Annotated[str | None, Field(description="'allow' to ignore a skip policy")] = None
    backfill: bool = False


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Annotated[str, Field(description="Why; shown by vigil jobs list")] = ""
    until: Annotated[str | None, Field(description="When it ends by itself (ISO 8601)")] = None


@dataclass(frozen=True)
class ControlServices:
    jobs: Mapping[str, JobSpec]
    control: ControlStore
    runs: RunStore
    invoke: Invoke
    clock: Clock = system_clock
    idempotency_store: BasePersistenceLayer | None = None
    """Where ``Idempotency-Key`` answers are kept (the runs table, under IDEMPOTENCY_PK)."""


def retries_left(record: RunRecord, spec: JobSpec, now: datetime) -> int:
    """Lambda's retries still to come for a FAILED tick: scheduled and manual runs alike are
    asynchronous invocations, so the tick is not final until they are spent. Counted from the
    attempt the latest request began at; none for a scheduled tick past ``max_lateness``, whose
    retries the guard refuses as too late."""
    if record.status is not RunStatus.FAILED:
        return 0
    scheduled = record.trigger in (None, Trigger.SCHEDULE.value)
    if scheduled and now > datetime.fromisoformat(record.tick) + spec.max_lateness:
        return 0
    used = record.attempts - record.first_attempt + 1
    return max(0, spec.retry_attempts + 1 - used)


def record_json(record: RunRecord, spec: JobSpec, now: datetime) -> dict[str, Any]:
    left = retries_left(record, spec, now)
    return {
        "job": record.job,
        "tick": record.tick,
        "status": record.status.value,
        # FAILED may be claimed again (a retry, a redrive, a rerun), but with no retry to come
        # it is where the tick stays until someone acts.
        "final": record.status in FINAL_STATUSES
        or (record.status is RunStatus.FAILED and not left),
        "retries_left": left,
        "attempts": record.attempts,
        "trigger": record.trigger,
        "requested_by": record.requested_by,
        "duration_ms": record.duration_ms,
        "duration_flag": record.duration_flag,
        "error": f"{record.error_type}: {record.error_message}" if record.error_type else None,
        "detail": record.detail,
    }


def start_run(
    services: ControlServices,
    job: str,
    request: RunRequest,
    requested_by: str,
    request_id: str | None = None,
) -> dict[str, Any]:
    """Run now, or run a given tick: refused (nothing invoked) when the job is unknown or paused;
    else the job's function is invoked asynchronously with the tick's event, as the scheduler
    does. The API's route and the console's button both call this."""
    spec = find_job(services.jobs, job)
    now = services.clock()
    head = services.runs.head(job)
    if is_paused(head, now):
        raise JobPaused(
            f"job {job} is paused ({head.pause_reason if head else ''}); resume it first"
        )
    recorded = False
    anchor = None
    if request.at is not None:
        key = tick_key(parse_time("at", request.at))
        recorded = services.control.record(job, key) is not None
        if spec.schedule.needs_anchor and not recorded:
            anchor = scheduled_anchor(services.control.latest_keys(job))
    terms = run_terms(
        spec,
        at=request.at,
        overlap=request.overlap,
        backfill=request.backfill,
        requested_by=requested_by,
        now=now,
        anchor=anchor,
        recorded=recorded,
        request_id=request_id,
    )
    services.invoke(spec.function, terms.event())
    return {"job": job, "tick": terms.key, "trigger": terms.trigger.value}


def build_control_app(services: ControlServices) -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True)
    jobs, control, runs = services.jobs, services.control, services.runs

    def now_ms() -> int:
        return int(services.clock().timestamp() * 1000)

    def caller() -> str:
        return caller_of(app.current_event.request_context)

    @app.get(
        "/jobs",
        summary="Every declared job's latest state, failing first, one page at a time",
    )
    def get_jobs(
        status: Annotated[
            str | None,
            Query(
                max_length=200,
                description=f"Only jobs in these states (commas, any case): {', '.join(FILTERS)}",
            ),
        ] = None,
        prefix: Annotated[
            str | None, Query(max_length=48, description="Only jobs whose name starts so")
        ] = None,
        limit: Annotated[
            int, Query(ge=1, le=MAX_LIMIT, description=f"Jobs a page ({DEFAULT_LIMIT})")
        ] = DEFAULT_LIMIT,
        next_page: Annotated[
            str | None,
            Query(alias="next", max_length=2048, description="next of the previous page"),
        ] = None,
    ) -> dict[str, Any]:
        query = jobs_query(status, prefix, limit, next_page)
        now = services.clock()
        page = list_jobs(
            jobs, runs.heads_of(n for n in jobs if n.startswith(query.prefix)), query, now
        )
        return {
            "jobs": [row_json(job, now_ms()) for job in page.entries],
            "next": page.next,
            "matching": page.matching,
        }

    @app.get("/jobs/<job>", summary="One job")
    def get_job(job: JobName) -> dict[str, Any]:
        spec = find_job(jobs, job)
        return head_json(spec, runs.head(job), now_ms())

    def start(job: str, request: RunRequest) -> dict[str, Any]:
        return start_run(
            services, job, request, caller(), app.current_event.request_context.request_id
        )

    start_once = (
        KeyedOnce(
            app,
            lambda keyed: start(keyed["job"], RunRequest.model_validate(keyed["run"])),
            services.idempotency_store,
        )
        if services.idempotency_store
        else None
    )

    @app.post("/jobs/<job>/runs", summary="Run now, or run a given tick, through the guard")
    def post_run(
        job: JobName,
        request: Annotated[RunRequest, Body(embed=False)],
        idempotency_key: Annotated[
            str | None,
            Header(alias="Idempotency-Key", max_length=255, description=HEADER_DESCRIPTION),
        ] = None,
    ) -> Response[dict[str, Any]]:
        find_job(jobs, job)  # an unknown job is refused before the idempotency store is touched
        if idempotency_key and start_once:
            body = start_once(idempotency_key, {"job": job, "run": request.model_dump()})
        else:
            body = start(job, request)
        return Response(HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, body)

    @app.get("/jobs/<job>/runs/<tick>", summary="One tick's record (poll until final)")
    def get_run(job: JobName, tick: Annotated[str, Path(max_length=40)]) -> dict[str, Any]:
        spec = find_job(jobs, job)
        record = control.record(job, tick)
        if record is None:
            raise TickNotFound(f"no record of {job} tick {tick} (yet)")
        return record_json(record, spec, services.clock())

    @app.post("/jobs/<job>/pause", summary="Pause: deliveries are recorded PAUSED, not run")
    def post_pause(
        job: JobName, request: Annotated[PauseRequest, Body(embed=False)]
    ) -> dict[str, Any]:
        spec = find_job(jobs, job)
        terms = pause_terms(request.reason, request.until, services.clock())
        head = control.pause(job, terms, caller(), spec.retention)
        return head_json(spec, head, now_ms())

    @app.post("/jobs/<job>/resume", summary="End a pause now")
    def post_resume(job: JobName) -> dict[str, Any]:
        spec = find_job(jobs, job)
        head = control.resume(job, caller(), services.clock(), spec.retention)
        return head_json(spec, head, now_ms())

    @app.get(
        "/jobs/<job>/backfill",
        summary="The ticks a backfill would run (none SUCCEEDED, UNCERTAIN, FENCED)",
    )
    def get_backfill(
        job: JobName,
        start: Annotated[str, Query(alias="from")],
        end: Annotated[str, Query(alias="to")],
    ) -> dict[str, Any]:
        spec = find_job(jobs, job)
        first, last = backfill_range(spec, start, end, services.clock())
        statuses = control.statuses(job, tick_key(first), tick_key(last))
        anchor = None
        if spec.schedule.needs_anchor:
            anchor = scheduled_anchor(list(statuses) + control.latest_keys(job))
        return backfill_plan(spec, first, last, statuses, anchor).to_json()

    app.exception_handler(RequestValidationError)(validation_response)
    app.exception_handler(list(_DOMAIN_ERRORS))(
        domain_error_response(_DOMAIN_ERRORS, idempotent_requests.MESSAGES)
    )
    answer_unknown_routes(app)

    return app
