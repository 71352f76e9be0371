"""``@scheduled_job``: the whole Lambda handler a job author needs.

The construct sets the job's name, policy and table in the environment; the decorator reads them
on the first invocation (not at import, so importing a job module stays cheap and side-effect
free), then guards every delivery with ``JobGuard``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from vigil import telemetry
from vigil.clock import Clock, Sleeper, system_clock
from vigil.events import MalformedEvent
from vigil.jobs.decisions import DurationFlag
from vigil.jobs.events import parse_tick
from vigil.jobs.finish import OutcomeUnrecorded
from vigil.jobs.guard import Body, JobGuard, Result, WrongJob
from vigil.jobs.model import JobSettings, Outcome
from vigil.jobs.store import RunStore
from vigil.persist import write_client
from vigil.telemetry import JobMetric

Handler = Callable[[Any, Any], dict[str, Any]]


def scheduled_job(
    body: Body | None = None,
    *,
    settings: JobSettings | None = None,
    client: Any = None,
    clock: Clock = system_clock,
    sleep: Sleeper = time.sleep,
) -> Any:
    """Turn ``body(run)`` into a guarded Lambda handler; keyword arguments are for tests."""

    def wrap(fn: Body) -> Handler:
        # Built on the first invocation and kept while the container lives: with it, what the
        # container remembers of outcomes it could not record (for Lambda's retry of a request).
        guard: JobGuard | None = None

        def build() -> JobGuard:
            resolved = settings or JobSettings.from_env()
            dynamodb = client or write_client("dynamodb")
            return JobGuard(resolved, RunStore(dynamodb, resolved.table), clock, sleep=sleep)

        def guarded(event: Any, context: Any) -> dict[str, Any]:
            nonlocal guard
            if guard is None:
                guard = build()
            return _handle(guard, fn, event, context)

        return functools.wraps(fn)(telemetry.instrument(guarded))

    return wrap(body) if body is not None else wrap


def _count(job: str, metric: JobMetric) -> None:
    """A success counts for the stack (one series, whatever the number of jobs); anything else
    for its job too (``job`` dimension): those series exist, and are billed, only while something
    goes wrong, and the stack's alarms read them by job (``infra.monitoring``)."""
    if metric is JobMetric.SUCCEEDED:
        telemetry.metrics().add_metric(name=metric, unit="Count", value=1)
    else:
        telemetry.count_one(metric, job=job)


def _handle(guard: JobGuard, body: Body, event: Any, context: Any) -> dict[str, Any]:
    logger = telemetry.logger()
    job = guard.settings.job
    try:
        tick = parse_tick(event)
    except MalformedEvent:
        _count(job, JobMetric.MALFORMED)
        logger.exception("rejected a malformed event; it goes to the dead-letter queue")
        raise
    logger.append_keys(job=job, tick=tick.key, delivery=tick.source)
    try:
        result = guard.execute(
            tick,
            body,
            remaining_ms=context.get_remaining_time_in_millis,
            holder=getattr(context, "aws_request_id", "local"),
        )
    except WrongJob:
        _count(job, JobMetric.MALFORMED)
        logger.exception("rejected an event for another job; it goes to the dead-letter queue")
        raise
    except OutcomeUnrecorded:
        # The body succeeded; its outcome waits on this container for Lambda's retry.
        _count(job, JobMetric.FINISH_UNRECORDED)
        logger.exception("run succeeded but its outcome is not recorded; Lambda's retry writes it")
        raise
    except Exception as error:
        _count(job, JobMetric.FAILED)
        flag = getattr(error, "vigil_duration_flag", None)
        if isinstance(flag, DurationFlag):
            _count(job, _FLAG_METRIC[flag])
        if isinstance(getattr(error, "vigil_unrecorded", None), OutcomeUnrecorded):
            _count(job, JobMetric.FINISH_UNRECORDED)
        logger.exception("job run failed; Lambda retries or dead-letters the event")
        raise
    _record(job, result)
    return result.to_json()


_OUTCOME_METRIC = {
    Outcome.SUCCEEDED: JobMetric.SUCCEEDED,
    Outcome.DUPLICATE: JobMetric.DUPLICATE,
    Outcome.SKIPPED: JobMetric.SKIPPED,
    Outcome.MISSED: JobMetric.MISSED,
    Outcome.FENCED: JobMetric.FENCED,
    Outcome.PAUSED: JobMetric.PAUSED,
    Outcome.UNCERTAIN: JobMetric.UNCERTAIN,
}
_FLAG_METRIC = {
    DurationFlag.TOO_LONG: JobMetric.TOO_LONG,
    DurationFlag.TOO_SHORT: JobMetric.TOO_SHORT,
}


_WORTH_A_WARNING = frozenset({Outcome.MISSED, Outcome.SKIPPED, Outcome.FENCED, Outcome.UNCERTAIN})


def _record(job: str, result: Result) -> None:
    _count(job, _OUTCOME_METRIC[result.outcome])
    if result.duration_flag:
        _count(job, _FLAG_METRIC[result.duration_flag])
    logger = telemetry.logger()
    log = logger.warning if result.outcome in _WORTH_A_WARNING else logger.info
    log(f"tick {result.outcome.value.lower()}", extra={"result": result.to_json()})
