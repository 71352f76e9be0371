"""The buttons: each the library call the CLI and the API make, with the console's actor.

Every action first reads what it is about and compares it with what the page showed (``seen``):
a button pressed on a view that has moved on (a tick already settled, a task already ended, an
observer already restarted or stopped, dead letters already redriven) is answered STALE and
writes nothing. The library's own conditional writes refuse the same cases between that read and
the write (``NotCancellable``, ``NotSettleable``, ``NotPaused``, ``PauseChanged``): those are
STALE answers too. Bad input (an unknown job, a pause without a reason) is REFUSED, nothing
written. Each action is logged once (``console action``: actor, action, target, outcome): with
the records' own ``requested_by``/``paused_by``, the audit trail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vigil import telemetry
from vigil.console.frame import Outcome, Tone
from vigil.console.services import ConsoleServices
from vigil.contract.journal import Verdict
from vigil.contract.tasks import SUSPENDED_STATUSES
from vigil.jobs.control import (
    InvalidRequest,
    JobPaused,
    NotPaused,
    UnknownJob,
    find_job,
    pause_terms,
)
from vigil.jobs.control_api import RunRequest, start_run
from vigil.jobs.control_store import PauseChanged
from vigil.jobs.redrive import redrive_job
from vigil.observers.model import Desired
from vigil.observers.registry import ObserverNotFound
from vigil.settle import NotSettleable
from vigil.tasks.errors import InvalidTask, NotCancellable, TaskNotFound
from vigil.tasks.queues import TaskQueue
from vigil.tasks.redrive import redrive as redrive_task

logger = telemetry.logger()


class Stale(RuntimeError):
    """The page showed a state that is no longer so: nothing was written."""


class Refused(ValueError):
    """The action cannot be done as asked (bad input, nothing there): nothing was written."""


Args = Mapping[str, Any]
Action = Callable[[ConsoleServices, Args, Mapping[str, Any], str, str], str]
"""(services, the button's args, the widget's form fields, actor, request id) -> what it did."""

STALE_ERRORS: tuple[type[Exception], ...] = (
    Stale,
    NotCancellable,
    NotSettleable,
    NotPaused,
    PauseChanged,
    JobPaused,
)
REFUSED_ERRORS: tuple[type[Exception], ...] = (
    Refused,
    InvalidRequest,
    InvalidTask,
    UnknownJob,
    TaskNotFound,
    ObserverNotFound,
)


MAX_ARG_BYTES = 256
"""Longer than any name, id, tick or effect Vigil accepts (task ids: 128 characters), and within
DynamoDB's key limits (a longer key is a ValidationException, not an answer)."""


def _text(args: Args, key: str) -> str:
    """A button's argument as text: refused when missing or longer than anything the pages offer
    (a forged one), before any read, and without echoing it."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
        raise Refused(f"the button sent no {key}")
    text = str(value)
    if len(text.encode()) > MAX_ARG_BYTES:
        raise Refused(
            f"the button sent a {key} of {len(text)} characters (at most {MAX_ARG_BYTES} bytes): "
            "no page offers that"
        )
    return text


def _unless_moved(args: Args, key: str, now: object, moved: str) -> None:
    """STALE when the button carries what its page showed under ``key`` and that is no longer so
    (a button without it, from an older page or the CLI's shape, is not checked)."""
    if args.get(key) not in (None, "") and now != args[key]:
        raise Stale(moved)


def _verdict(args: Args) -> Verdict:
    try:
        return Verdict(str(args.get("verdict")))
    except ValueError:
        raise Refused(f"unknown verdict {args.get('verdict')!r}") from None


# -- jobs -------------------------------------------------------------------------------------


def jobs_run(services: ConsoleServices, args: Args, forms: Any, actor: str, request: str) -> str:
    job = _text(args, "job")
    started = start_run(services.control_services(), job, RunRequest(), actor, request)
    return f"{job}: run requested (tick {started['tick']}, trigger {started['trigger']})"


def jobs_pause(services: ConsoleServices, args: Args, forms: Any, actor: str, request: str) -> str:
    job = _text(args, "job")
    spec = find_job(services.jobs, job)
    now = services.clock()
    head = services.runs.head(job)
    if head is not None and head.paused_at(int(now.timestamp() * 1000)):
        raise Stale(
            f"{job} is already paused (by {head.paused_by}, since {head.paused_since}: "
            f"{head.pause_reason}): nothing changed"
        )
    reason = str(forms.get(f"reason-{job}") or forms.get("reason") or "")
    terms = pause_terms(reason, None, now)
    services.control.pause(job, terms, actor, spec.retention)
    return f"{job}: paused ({terms.reason})"


def jobs_resume(services: ConsoleServices, args: Args, forms: Any, actor: str, request: str) -> str:
    job = _text(args, "job")
    spec = find_job(services.jobs, job)
    now = services.clock()
    head = services.runs.head(job)
    if head is None or not head.paused_at(int(now.timestamp() * 1000)):
        raise Stale(f"{job} is not paused any more: nothing changed")
    _unless_moved(
        args,
        "seen",
        head.paused_since,
        f"{job} was paused again since this page was drawn (by {head.paused_by}, "
        f"since {head.paused_since}): look again before resuming; nothing changed",
    )
    services.control.resume(job, actor, now, spec.retention)
    return f"{job}: resumed"


def jobs_redrive(
    services: ConsoleServices, args: Args, forms: Any, actor: str, request: str
) -> str:
    job = _text(args, "job")
    find_job(services.jobs, job)
    entry = services.job_entries.get(job) or {}
    url = services.dead_letters.get(job)
    if not url or not entry:
        raise Refused(f"{job} has no dead-letter queue in the catalog")
    waiting = int(
        services.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"].get("ApproximateNumberOfMessages", 0)
    )
    if not waiting:
        raise Stale(f"{job} has no dead letters any more (redriven already?): nothing sent")
    function = str(entry["function"])
    done = redrive_job(
        services.sqs,
        entry,
        send=lambda event: services.invoke(function, event),
        call=lambda event: services.call(function, event),
    )
    kept = sum(1 for r in done if r.kept)
    return f"{job}: {len(done) - kept} dead letters handed back" + (
        f", {kept} failed again and stay for the next redrive" if kept else ""
    )


def jobs_settle(services: ConsoleServices, args: Args, forms: Any, actor: str, request: str) -> str:
    job, tick, effect = _text(args, "job"), _text(args, "tick"), _text(args, "effect")
    find_job(services.jobs, job)
    verdict = _verdict(args)
    record = services.runs.settle(job, tick, effect, verdict=verdict, now=services.clock())
    return f"{job} tick {tick}: settled {verdict.value}, now {record.status.value}"


# -- tasks ------------------------------------------------------------------------------------


def _tasks(services: ConsoleServices) -> Any:
    if services.tasks is None:
        raise Refused("this stack declares no tasks")
    return services.tasks


def tasks_cancel(
    services: ConsoleServices, args: Args, forms: Any, actor: str, request: str
) -> str:
    client = _tasks(services)
    task, task_id = _text(args, "task"), _text(args, "id")
    current = client.get(task, task_id)
    _unless_moved(
        args,
        "seen",
        current.status.value,
        f"{task} {task_id} is {current.status.value} now (the page showed "
        f"{args.get('seen')}): nothing changed",
    )
    record = client.cancel(task, task_id, by=actor)
    if record.status.value == "RUNNING":
        return (
            f"{task} {task_id}: cancel requested; the run stops at its next progress note, "
            "step or fenced write and ends CANCELLED"
        )
    if record.status in SUSPENDED_STATUSES:
        return (
            f"{task} {task_id}: cancel requested; the {record.status.value} flow is woken to "
            "stop, run its compensations and end CANCELLED"
        )
    return f"{task} {task_id}: {record.status.value}"


def tasks_redrive(
    services: ConsoleServices, args: Args, forms: Any, actor: str, request: str
) -> str:
    client = _tasks(services)
    task = _text(args, "task")
    spec = client.catalog.spec(task)
    queue = TaskQueue(services.sqs, spec.queue_url, spec.dead_letter_url)
    if not queue.dead_letters():
        raise Stale(f"{task} has no dead letters any more (redriven already?): nothing sent")
    done = redrive_task(services.sqs, queue, task=task)
    return f"{task}: {len(done.moved)} tasks sent back to the queue" + (
        f", {len(done.kept)} dead letters are not tasks and stay" if done.kept else ""
    )


def tasks_settle(
    services: ConsoleServices, args: Args, forms: Any, actor: str, request: str
) -> str:
    client = _tasks(services)
    task, task_id, effect = _text(args, "task"), _text(args, "id"), _text(args, "effect")
    verdict = _verdict(args)
    store = client.store(client.catalog.spec(task))
    record = store.settle(task, task_id, effect, verdict=verdict, now=services.clock())
    return f"{task} {task_id}: settled {verdict.value}, now {record.status.value}"


# -- observers --------------------------------------------------------------------------------


def _registry(services: ConsoleServices) -> Any:
    if services.observers is None:
        raise Refused("this stack has no observer fleet")
    return services.observers


def observers_restart(
    services: ConsoleServices, args: Args, forms: Any, actor: str, request: str
) -> str:
    registry = _registry(services)
    name = _text(args, "name")
    current = registry.get(name)
    _unless_moved(
        args,
        "seen",
        current.generation,
        f"{name} is at generation {current.generation} now (the page showed "
        f"{args.get('seen')}): restarted already? nothing changed",
    )
    # A stop keeps the generation: without this a restart pressed on a view from before the
    # stop would re-arm the observer someone has just stopped.
    _unless_moved(
        args,
        "desired",
        current.desired.value,
        f"{name} is desired {current.desired.value.lower()} now (the page showed "
        f"{str(args.get('desired')).lower()}: stopped since?): nothing changed",
    )
    done = registry.request_restart(name)
    return f"{name}: restart requested (status {done.status.value})"


def observers_stop(
    services: ConsoleServices, args: Args, forms: Any, actor: str, request: str
) -> str:
    registry = _registry(services)
    name = _text(args, "name")
    current = registry.get(name)
    if current.desired is Desired.STOPPED:
        raise Stale(
            f"{name} is already stopped or stopping ({current.status.value}): nothing changed"
        )
    done = registry.request_stop(name)
    return f"{name}: stop requested (status {done.status.value})"


def observers_settle(
    services: ConsoleServices, args: Args, forms: Any, actor: str, request: str
) -> str:
    registry = _registry(services)
    name, effect = _text(args, "name"), _text(args, "effect")
    verdict = _verdict(args)
    done = registry.request_settle(name, effect, verdict=verdict)
    return f"{name}: settled {verdict.value}; restart requested (status {done.status.value})"


ACTIONS: dict[str, Action] = {
    "jobs.run": jobs_run,
    "jobs.pause": jobs_pause,
    "jobs.resume": jobs_resume,
    "jobs.redrive": jobs_redrive,
    "jobs.settle": jobs_settle,
    "tasks.cancel": tasks_cancel,
    "tasks.redrive": tasks_redrive,
    "tasks.settle": tasks_settle,
    "observers.restart": observers_restart,
    "observers.stop": observers_stop,
    "observers.settle": observers_settle,
}


def act(
    services: ConsoleServices,
    args: Args,
    forms: Mapping[str, Any],
    actor: str,
    request: str,
) -> Outcome:
    """Do one button's action; what it did, or why nothing was written."""
    name = str(args.get("action"))
    action = ACTIONS.get(name)
    if action is None:
        outcome = Outcome(Tone.REFUSED, f"unknown action {name!r}: nothing done")
    else:
        try:
            outcome = Outcome(Tone.DONE, action(services, args, forms, actor, request))
        except STALE_ERRORS as stale:
            outcome = Outcome(Tone.STALE, f"Not done, the page was out of date: {stale}")
        except REFUSED_ERRORS as refused:
            outcome = Outcome(Tone.REFUSED, f"Refused: {refused}")
    logger.info(
        "console action",
        extra={
            "actor": actor,
            "action": name,
            "target": {k: v for k, v in args.items() if k not in ("action", "page")},
            "outcome": outcome.tone.value,
            "said": outcome.message,
        },
    )
    return outcome
