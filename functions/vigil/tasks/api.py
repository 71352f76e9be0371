"""The tasks routes of the management API: enqueue, read, list, cancel and settle a task;
signal a flow.

IAM-authorized like the other routes; the same ``{"error", "message"}`` answers
(``vigil.http_answers``). Every check runs before anything is sent or written: ``enqueue``
refuses bad input as ``InvalidTask`` (422 naming the field), an unknown task or id is 404, a
cancel of a task that has started or ended is 409.

``Idempotency-Key`` is the task's key when the body names none: the key is already what makes an
enqueue idempotent (the same key is the same task), so no separate idempotency store is needed.
The record keeps a digest of the request (``enqueue_digest``, the library's and the CLI's too): a retried POST answers the same id
without sending anything, and the key reused with a different body (payload, delay, at or group)
is 422 ``idempotency_key_reused``, with nothing sent or written, as on the other APIs' POSTs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import Annotated, Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from vigil import idempotent_requests
from vigil.contract.api_errors import INVALID_FIELD, ErrorCode
from vigil.contract.flows import STEP_NAME
from vigil.contract.journal import Verdict
from vigil.contract.tasks import TASK_NAME, TaskStatus
from vigil.http_answers import (
    answer_unknown_routes,
    caller_of,
    domain_error_response,
    validation_response,
)
from vigil.settle import NotSettleable
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.errors import (
    EnqueuedUnrecorded,
    InvalidTask,
    KeyReused,
    NotCancellable,
    TaskNotFound,
    UnknownTask,
)
from vigil.tasks.flows.errors import SignalRefused
from vigil.tasks.flows.settle import NO_RESULT

TaskName = Annotated[str, Path(pattern=TASK_NAME.pattern)]
TaskId = Annotated[str, Path(max_length=3 * 128)]
"""Percent-encoded as the path carries it (``#`` is ``%23``): decoded by the route (an id has no
``%`` of its own, so decoding is unambiguous)."""
MAX_PAGE = 100

_DOMAIN_ERRORS: dict[type[Exception], tuple[HTTPStatus, str]] = {
    UnknownTask: (HTTPStatus.NOT_FOUND, ErrorCode.TASK_NOT_FOUND),
    TaskNotFound: (HTTPStatus.NOT_FOUND, ErrorCode.TASK_ID_NOT_FOUND),
    InvalidTask: (HTTPStatus.UNPROCESSABLE_ENTITY, INVALID_FIELD),
    KeyReused: idempotent_requests.KEY_REUSED,
    NotCancellable: (HTTPStatus.CONFLICT, ErrorCode.NOT_CANCELLABLE),
    SignalRefused: (HTTPStatus.CONFLICT, ErrorCode.SIGNAL_REFUSED),
    NotSettleable: (HTTPStatus.CONFLICT, ErrorCode.NOT_SETTLEABLE),
    # The message is sent (the task runs); the message names the id to retry the POST with.
    EnqueuedUnrecorded: (HTTPStatus.SERVICE_UNAVAILABLE, ErrorCode.ENQUEUED_UNRECORDED),
}
API_FIELDS = {"delay": "delay_seconds", "id": "task_id"}
"""``InvalidTask.field`` (the library's argument) -> the API's own name for it, so a refused
value has the code its validation would give (``invalid_delay_seconds``, ``invalid_task_id``)."""


class EnqueueRequest(BaseModel):
    """``POST /tasks/{task}``."""

    model_config = ConfigDict(extra="forbid")

    payload: Annotated[dict[str, Any], Field(description="The task's input (a JSON object)")]
    key: Annotated[
        str | None, Field(description="The task's id; the same key is the same task")
    ] = None
    delay_seconds: Annotated[float | None, Field(description="Start no sooner than this")] = None
    at: Annotated[str | None, Field(description="Start at (ISO 8601 with zone)")] = None
    group: Annotated[str | None, Field(description="Ordered tasks: run in order per group")] = None
    priority: Annotated[
        str | None,
        Field(description="One of the task's declared priority levels (absent: normal)"),
    ] = None


class SignalRequest(BaseModel):
    """``POST /tasks/{task}/{id}/signals/{name}``."""

    model_config = ConfigDict(extra="forbid")

    payload: Annotated[Any, Field(description="What run.wait_for(name) returns (JSON)")] = None
    key: Annotated[
        str | None,
        Field(description="The signal's idempotency key (default: the payload's digest)"),
    ] = None


class SettleRequest(BaseModel):
    """``POST /tasks/{task}/{id}/settle``: a person's word on the effect ``run.once`` (or a
    flow's ``once=True`` step, ``step:<name>``) stopped the task UNCERTAIN on; the words of
    ``vigil tasks settle --done|--done-rerun|--not-done``."""

    model_config = ConfigDict(extra="forbid")

    effect: Annotated[
        str, Field(min_length=1, max_length=200, description="The record's uncertain_effect")
    ]
    outcome: Annotated[
        Verdict,
        Field(
            description="done: it happened (a task SUCCEEDED; a flow's step is done and the "
            "flow resumes after a redrive); done_rerun: it happened and the rest must run "
            "(FAILED, for a redrive); not_done: it did not (FAILED, a redrive does it)"
        ),
    ]
    result: Annotated[
        Any,
        Field(
            description="A flow's step:<name> settled done: the step's result (JSON; absent: null)"
        ),
    ] = None
    """Absent and null differ only for a refusal: a result given with not_done is refused."""


SignalName = Annotated[str, Path(pattern=STEP_NAME.pattern)]
IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", max_length=255, description="The key, if none in the body"),
]


def _key(in_body: str | None, header: str | None) -> str | None:
    """The request's key: the body's, else the ``Idempotency-Key`` header's (both: they agree)."""
    if in_body is not None and header and header != in_body:
        raise InvalidTask("key", "the body's key and the Idempotency-Key header differ")
    return in_body if in_body is not None else header


@dataclass(frozen=True)
class TasksServices:
    client: TaskClient


def _parse_at(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidTask("at", f"at must be an ISO 8601 time with a zone, got {text!r}") from None


def build_tasks_app(
    services: TasksServices, app: APIGatewayRestResolver | None = None
) -> APIGatewayRestResolver:
    """The routes, on ``app`` if given (a shared API's resolver), else on a new one."""
    app = app or APIGatewayRestResolver(enable_validation=True)
    client = services.client

    @app.post("/tasks/<task>", summary="Enqueue a task (the same key is the same task)")
    def post_task(
        task: TaskName,
        request: Annotated[EnqueueRequest, Body(embed=False)],
        idempotency_key: IdempotencyKey = None,
    ) -> Response[dict[str, Any]]:
        key = _key(request.key, idempotency_key)
        task_id = client.enqueue(
            task,
            request.payload,
            key=key,
            delay=request.delay_seconds,
            at=_parse_at(request.at),
            group=request.group,
            priority=request.priority,
        )
        record = client.get(task, task_id)
        body = {"task": task, "id": task_id, "status": record.status.value}
        return Response(HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, body)

    @app.get("/tasks/<task>/<task_id>", summary="One task's record (poll until final)")
    def get_task(task: TaskName, task_id: TaskId) -> dict[str, Any]:
        return client.get(task, unquote(task_id)).to_json()

    @app.post(
        "/tasks/<task>/<task_id>/signals/<name>",
        summary="Signal a flow's run.wait_for(name): kept until it waits, woken if it does",
    )
    def post_signal(
        task: TaskName,
        task_id: TaskId,
        name: SignalName,
        request: Annotated[SignalRequest, Body(embed=False)],
        idempotency_key: IdempotencyKey = None,
    ) -> Response[dict[str, Any]]:
        key = _key(request.key, idempotency_key)
        sent = client.signal(task, unquote(task_id), name, request.payload, key=key)
        return Response(HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, sent.to_json())

    @app.post(
        "/tasks/<task>/<task_id>/settle",
        summary="Say whether an UNCERTAIN task's effect (or a flow's step) happened",
    )
    def post_settle(
        task: TaskName, task_id: TaskId, request: Annotated[SettleRequest, Body(embed=False)]
    ) -> dict[str, Any]:
        task_id = unquote(task_id)
        client.get(task, task_id, steps=False)  # an id never enqueued is 404
        fields = request.model_fields_set
        result = request.result if "result" in fields else NO_RESULT
        settled = client.settle(
            task, task_id, request.effect, verdict=request.outcome, result=result
        )
        return settled.to_json()

    @app.get("/tasks/<task>", summary="A task's records by id, one page at a time")
    def list_tasks(
        task: TaskName,
        status: Annotated[
            str | None,
            Query(
                max_length=32,
                description=f"Only tasks in this status, any case: {', '.join(TaskStatus)}",
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = MAX_PAGE,
        next_page: Annotated[
            str | None, Query(alias="next", description="next of the previous page")
        ] = None,
    ) -> dict[str, Any]:
        records, token = client.list(task, status, limit=limit, page=next_page)
        return {"tasks": [r.to_json() for r in records], "next": token}

    @app.delete(
        "/tasks/<task>/<task_id>",
        summary="Cancel a task: QUEUED ends CANCELLED now, RUNNING is asked to stop (409 once ended)",
    )
    def delete_task(task: TaskName, task_id: TaskId) -> dict[str, Any]:
        task_id = unquote(task_id)
        client.get(task, task_id)  # an id never enqueued is 404, not a new CANCELLED record
        by = caller_of(app.current_event.request_context)
        return client.cancel(task, task_id, by=by).to_json()

    app.exception_handler(RequestValidationError)(validation_response)
    app.exception_handler(list(_DOMAIN_ERRORS))(
        domain_error_response(_DOMAIN_ERRORS, fields=API_FIELDS)
    )
    answer_unknown_routes(app)

    return app
