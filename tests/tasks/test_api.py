"""The tasks routes of the management API, as API Gateway delivers them, on moto."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.api_errors import Refusal, check_refusals
from tests.helpers.rest import send_json
from tests.helpers.tasks import ORDERED, PLAIN, Counting, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from vigil.contract.api_errors import INVALID_FIELD, ErrorCode, documented
from vigil.contract.tasks import TaskStatus
from vigil.tasks.api import TasksServices, build_tasks_app
from vigil_tools.api_client import rest_event
from vigil_tools.lambda_context import LambdaContext


class Api:
    def __init__(self, stack: Stack) -> None:
        self.sqs, self.dynamodb = Counting(stack.sqs), Counting(stack.dynamodb)
        self.app = build_tasks_app(
            TasksServices(
                client=stack.client(sqs=self.sqs, dynamodb=self.dynamodb),
            )
        )

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        raw: str | None = None,
        **query: str,
    ) -> tuple[int, Any]:
        return send_json(
            self.app.resolve, method, path, body, raw=raw, headers=headers, query=query
        )


@pytest.fixture
def api(stack: Stack) -> Api:
    return Api(stack)


def test_post_enqueues_and_get_reads_the_record_back(
    api: Api, stack: Stack, make_handler: HandlerFactory
) -> None:
    status, body = api("POST", f"/tasks/{PLAIN}", {"payload": {"order": "o-1"}, "key": "o-1"})
    assert (status, body) == (202, {"task": PLAIN, "id": "o-1", "status": "QUEUED"})

    invoke(
        make_handler(lambda run, payload: {"receipt": payload["order"]}),
        records(stack.messages(stack.catalog.spec(PLAIN).queue_url)),
    )
    status, record = api("GET", f"/tasks/{PLAIN}/o-1")
    assert status == 200
    assert (record["status"], record["attempts"], record["result"]) == (
        "SUCCEEDED",
        1,
        {"receipt": "o-1"},
    )


def test_the_idempotency_key_is_the_key_when_the_body_has_none(api: Api, stack: Stack) -> None:
    for _ in range(2):
        status, body = api(
            "POST", f"/tasks/{PLAIN}", {"payload": {}}, headers={"Idempotency-Key": "k-1"}
        )
        assert (status, body["id"]) == (202, "k-1")
    assert len(stack.items()) == 1
    status, body = api(
        "POST", f"/tasks/{PLAIN}", {"payload": {}, "key": "k-2"}, headers={"Idempotency-Key": "k-1"}
    )
    assert (status, body["error"]) == (422, "invalid_key")


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ({"payload": {"order": "o-1"}}, {"payload": {"order": "o-2"}}),
        ({"payload": {}}, {"payload": {}, "delay_seconds": 60}),
        ({"payload": {}, "at": "2026-11-23T09:00:00+00:00"}, {"payload": {}}),
    ],
    ids=["another payload", "a delay added", "the at dropped"],
)
@pytest.mark.parametrize("where", ["header", "body"])
def test_a_key_reused_with_another_body_is_422_and_sends_nothing(
    api: Api, stack: Stack, where: str, first: dict[str, Any], then: dict[str, Any]
) -> None:
    """The key reused with a different body answered 202 and the first task's id: the second
    request was dropped silently (or worse, its message sent, to be claimed first and run in
    the first one's place). The Idempotency-Key draft answers 422, as the other APIs' POSTs do;
    the same request again answers the id with nothing sent."""

    def post(body: dict[str, Any]) -> tuple[int, Any]:
        if where == "header":
            return api("POST", f"/tasks/{PLAIN}", body, headers={"Idempotency-Key": "k-1"})
        return api("POST", f"/tasks/{PLAIN}", {**body, "key": "k-1"})

    assert post(first)[0] == 202
    before, sent = stack.items(), stack.queued()
    api.sqs.reset()
    api.dynamodb.reset()

    status, answer = post(then)
    assert (status, answer["error"]) == (422, "idempotency_key_reused")
    assert "k-1" in answer["message"] and "different request" in answer["message"]
    assert api.sqs.calls == [] and set(api.dynamodb.counts) == {"get_item"}
    assert (stack.items(), stack.queued()) == (before, sent)

    status, again = post(first)
    assert (status, again["id"]) == (202, "k-1")
    assert api.sqs.calls == [] and stack.queued() == sent


BAD_POSTS: list[tuple[str, str, Any, int, str]] = [
    ("unknown task", "nope", {"payload": {}}, 404, "task_not_found"),
    ("no payload", PLAIN, {}, 422, "invalid_payload"),
    ("payload not an object", PLAIN, {"payload": [1]}, 422, "invalid_payload"),
    ("unknown field", PLAIN, {"payload": {}, "colour": 1}, 422, "invalid_body"),
    ("bad key", PLAIN, {"payload": {}, "key": "a b"}, 422, "invalid_key"),
    ("key with a slash", PLAIN, {"payload": {}, "key": "tenant/1"}, 422, "invalid_key"),
    ("negative delay", PLAIN, {"payload": {}, "delay_seconds": -1}, 422, "invalid_delay_seconds"),
    ("at in the past", PLAIN, {"payload": {}, "at": "2020-01-01T00:00:00Z"}, 422, "invalid_at"),
    ("at not a time", PLAIN, {"payload": {}, "at": "tomorrow"}, 422, "invalid_at"),
    ("group on plain", PLAIN, {"payload": {}, "group": "g"}, 422, "invalid_group"),
    (
        "delay on ordered",
        ORDERED,
        {"payload": {}, "delay_seconds": 5},
        422,
        "invalid_delay_seconds",
    ),
    ("too large", PLAIN, {"payload": {"b": "x" * 262_144}}, 422, "invalid_payload"),
]


@pytest.mark.parametrize(
    ("case", "task", "body", "status", "code"), BAD_POSTS, ids=[c[0] for c in BAD_POSTS]
)
def test_bad_posts_are_4xx_and_send_nothing(
    api: Api, stack: Stack, case: str, task: str, body: Any, status: int, code: str
) -> None:
    answer_status, answer = api("POST", f"/tasks/{task}", body)
    assert (answer_status, answer["error"]) == (status, code), answer
    assert answer["message"]
    assert (api.sqs.calls, api.dynamodb.calls, stack.items()) == ([], [], [])


def test_a_body_that_is_not_json_is_400(api: Api) -> None:
    status, answer = api("POST", f"/tasks/{PLAIN}", raw="{nope")
    assert (status, answer["error"]) == (400, "invalid_json")


def test_unknown_tasks_and_ids_are_404(api: Api) -> None:
    status, answer = api("GET", f"/tasks/{PLAIN}/never")
    assert (status, answer["error"]) == (404, "task_id_not_found")
    status, answer = api("GET", "/tasks/nope/x")
    assert (status, answer["error"]) == (404, "task_not_found")
    assert "send-receipt" in answer["message"]
    status, answer = api("DELETE", f"/tasks/{PLAIN}/never")
    assert (status, answer["error"]) == (404, "task_id_not_found")


def test_list_filters_by_status_and_pages(api: Api) -> None:
    for n in range(3):
        api("POST", f"/tasks/{PLAIN}", {"payload": {}, "key": f"o-{n}"})
    api("DELETE", f"/tasks/{PLAIN}/o-1")
    status, page = api("GET", f"/tasks/{PLAIN}", limit="2")
    assert status == 200 and [t["id"] for t in page["tasks"]] == ["o-0", "o-1"]
    status, rest = api("GET", f"/tasks/{PLAIN}", limit="2", next=page["next"])
    assert [t["id"] for t in rest["tasks"]] == ["o-2"]
    status, cancelled = api("GET", f"/tasks/{PLAIN}", status="CANCELLED")
    assert [t["id"] for t in cancelled["tasks"]] == ["o-1"]
    assert api("GET", f"/tasks/{PLAIN}", status="DONE")[0] == 422
    assert api("GET", f"/tasks/{PLAIN}", limit="0")[0] == 422
    assert api("GET", f"/tasks/{PLAIN}", next="garbage")[1]["error"] == "invalid_next"


def test_the_status_filter_takes_any_case_and_names_the_statuses_when_unknown(
    api: Api, stack: Stack
) -> None:
    """``?status=failed`` was refused (422), the enum matched case-sensitively; ``vigil tasks
    list --status failed`` took it. One rule now, in ``TaskClient.list`` for every caller."""
    api("POST", f"/tasks/{PLAIN}", {"payload": {}, "key": "o-1"})
    api("DELETE", f"/tasks/{PLAIN}/o-1")
    for spelling in ("CANCELLED", "cancelled", "Cancelled"):
        status, page = api("GET", f"/tasks/{PLAIN}", status=spelling)
        assert (status, [t["id"] for t in page["tasks"]]) == (200, ["o-1"]), spelling
        records, _ = stack.client().list(PLAIN, spelling)
        assert [r.id for r in records] == ["o-1"]
    status, answer = api("GET", f"/tasks/{PLAIN}", status="done")
    assert (status, answer["error"]) == (422, "invalid_status")
    assert "'done'" in answer["message"] and all(s in answer["message"] for s in TaskStatus)


def test_cancel_is_200_then_409_once_final_and_asks_a_running_task_to_stop(
    api: Api, stack: Stack, make_handler: HandlerFactory
) -> None:
    api("POST", f"/tasks/{PLAIN}", {"payload": {}, "key": "o-1"})
    status, record = api("DELETE", f"/tasks/{PLAIN}/o-1")
    assert (status, record["status"]) == (200, "CANCELLED")
    status, answer = api("DELETE", f"/tasks/{PLAIN}/o-1")
    assert (status, answer["error"]) == (409, "not_cancellable")
    assert "CANCELLED" in answer["message"]

    api("POST", f"/tasks/{PLAIN}", {"payload": {}, "key": "o-2"})
    seen: list[Any] = []

    def cancel_while_running(run: Any, payload: Any) -> None:
        seen.append(api("DELETE", f"/tasks/{PLAIN}/o-2"))
        run.progress(50)  # told here: TaskCancelled

    batch = [
        r
        for r in records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
        if '"o-2"' in r["body"]
    ]
    assert invoke(make_handler(cancel_while_running), batch) == []
    ((status, answer),) = seen
    assert (status, answer["status"]) == (200, "RUNNING")
    assert answer["cancel_requested_at"] and answer["cancel_requested_by"]
    status, answer = api("GET", f"/tasks/{PLAIN}/o-2")
    assert (status, answer["status"], answer["error_type"]) == (200, "CANCELLED", "TaskCancelled")
    status, answer = api("DELETE", f"/tasks/{PLAIN}/o-2")
    assert (status, answer["error"]) == (409, "not_cancellable")


def test_the_handler_reads_the_catalog_from_its_environment_and_counts_no_enqueues(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Enqueues are counted by SQS (the queue's NumberOfMessagesSent, on the dashboard), which
    sees every one: a count here would see the API's alone, not an application's boto3 ones."""
    from handlers import tasks_api

    monkeypatch.setenv("VIGIL_TASKS_CATALOG", stack.catalog.to_json())
    monkeypatch.setattr(tasks_api, "_app", None)
    monkeypatch.setattr(tasks_api, "_client", None)  # built by any earlier test's audit too
    event = rest_event(
        "POST",
        f"/tasks/{PLAIN}",
        headers={"Content-Type": "application/json", "Idempotency-Key": "o-1"},
        body=json.dumps({"payload": {"order": "o-1"}}),
    )
    answer = tasks_api.handler(event, LambdaContext())
    assert answer["statusCode"] == 202
    assert "TaskEnqueued" not in capsys.readouterr().out


def test_an_id_is_addressable_percent_encoded(api: Api) -> None:
    """Ids with characters a URL must encode (``#``, ``:``, ``@``) arrive percent-encoded in the
    path (API Gateway's REST API keeps the encoding): the routes decode them."""
    assert api("POST", f"/tasks/{PLAIN}", {"payload": {}, "key": "order#1:a@b"})[0] == 202
    status, record = api("GET", f"/tasks/{PLAIN}/order%231%3Aa%40b")
    assert (status, record["id"]) == (200, "order#1:a@b")
    status, record = api("DELETE", f"/tasks/{PLAIN}/order%231%3Aa%40b")
    assert (status, record["status"]) == (200, "CANCELLED")


POST, ONE, LIST, CANCEL, SIGNAL, SETTLE = (
    ("POST", "/tasks/{task}"),
    ("GET", "/tasks/{task}/{task_id}"),
    ("GET", "/tasks/{task}"),
    ("DELETE", "/tasks/{task}/{task_id}"),
    ("POST", "/tasks/{task}/{task_id}/signals/{name}"),
    ("POST", "/tasks/{task}/{task_id}/settle"),
)
TASK_REFUSALS = [
    Refusal(*POST, "/tasks/nope", {"payload": {}}),
    Refusal(*POST, "/tasks/Bad_Name", {"payload": {}}),
    Refusal(*POST, f"/tasks/{PLAIN}", raw="{nope"),
    Refusal(*POST, f"/tasks/{PLAIN}", [1]),
    Refusal(*POST, f"/tasks/{PLAIN}", {"payload": {}, "colour": 1}),
    Refusal(*POST, f"/tasks/{PLAIN}", {"payload": {}, "delay_seconds": -1}),
    Refusal(*POST, f"/tasks/{PLAIN}", {"payload": {}, "delay_seconds": "soon"}),
    Refusal(*POST, f"/tasks/{PLAIN}", {"payload": {}, "at": "tomorrow"}),
    Refusal(*POST, f"/tasks/{PLAIN}", {"payload": {}, "key": "a b"}),
    Refusal(*POST, f"/tasks/{PLAIN}", {"payload": {}}, headers={"Idempotency-Key": "k" * 256}),
    Refusal(*POST, f"/tasks/{PLAIN}", {"payload": {"n": 2}}, headers={"Idempotency-Key": "k-1"}),
    Refusal(*ONE, f"/tasks/{PLAIN}/never"),
    Refusal(*ONE, f"/tasks/{PLAIN}/{'x' * 400}"),
    Refusal(*LIST, "/tasks/nope"),
    Refusal(*LIST, f"/tasks/{PLAIN}", query={"status": "done"}),
    Refusal(*LIST, f"/tasks/{PLAIN}", query={"limit": "0"}),
    Refusal(*LIST, f"/tasks/{PLAIN}", query={"next": "garbage"}),
    Refusal(*CANCEL, f"/tasks/{PLAIN}/never"),
    Refusal(*CANCEL, f"/tasks/{PLAIN}/k-1"),  # cancelled just before: 409
    Refusal(*CANCEL, f"/tasks/{PLAIN}/{'x' * 400}"),
    Refusal(*SIGNAL, f"/tasks/{PLAIN}/never/signals/go", {"payload": 1}),
    Refusal(*SIGNAL, f"/tasks/{PLAIN}/k-1/signals/go", {"payload": 1}),  # CANCELLED: 409
    Refusal(*SIGNAL, f"/tasks/{PLAIN}/k-1/signals/no%20way", {"payload": 1}),
    Refusal(*SIGNAL, f"/tasks/{PLAIN}/k-1/signals/go", {"payload": 1, "then": 2}),
    Refusal(*SIGNAL, f"/tasks/{PLAIN}/k-1/signals/go", {"payload": 1, "key": "a b"}),
    Refusal(*SETTLE, f"/tasks/{PLAIN}/never/settle", {"effect": "x", "outcome": "done"}),
    Refusal(*SETTLE, f"/tasks/{PLAIN}/k-1/settle", {"effect": "x", "outcome": "done"}),
    Refusal(*SETTLE, f"/tasks/{PLAIN}/k-1/settle", {"effect": "x", "outcome": "maybe"}),
    Refusal(*SETTLE, f"/tasks/{PLAIN}/k-1/settle", {"effect": "x", "outcome": "done", "result": 1}),
]


def test_every_routes_refusals_use_the_documented_codes(api: Api) -> None:
    """The codes of one field differed by who refused it: a negative ``delay_seconds`` was
    ``invalid_delay`` (the library's argument) and a non-number ``invalid_delay_seconds`` (the
    validation's); an invalid id ``invalid_id`` against the path's ``task_id``; an unknown field
    ``invalid_<that field>``. Now every code is one of ``vigil.contract.api_errors``."""
    assert api("POST", f"/tasks/{PLAIN}", {"payload": {"n": 1}}, headers={"Idempotency-Key": "k-1"})
    assert api("DELETE", f"/tasks/{PLAIN}/k-1")[0] == 200

    def send(refusal: Refusal) -> tuple[int, Any]:
        return api(
            refusal.method,
            refusal.path,
            refusal.body,
            headers=refusal.headers,
            raw=refusal.raw,
            **refusal.query,
        )

    codes = check_refusals(api.app, send, TASK_REFUSALS)
    assert codes == [
        "task_not_found",
        "invalid_task",
        "invalid_json",
        "invalid_body",
        "invalid_body",
        "invalid_delay_seconds",
        "invalid_delay_seconds",
        "invalid_at",
        "invalid_key",
        "invalid_idempotency_key",
        "idempotency_key_reused",
        "task_id_not_found",
        "invalid_task_id",
        "task_not_found",
        "invalid_status",
        "invalid_limit",
        "invalid_next",
        "task_id_not_found",
        "not_cancellable",
        "invalid_task_id",
        "task_id_not_found",
        "signal_refused",
        "invalid_name",
        "invalid_body",
        "invalid_key",
        "task_id_not_found",
        "not_settleable",
        "invalid_outcome",
        "invalid_result",
    ]


def test_every_apis_error_table_uses_the_one_set_of_codes() -> None:
    """The three APIs' domain errors and the shared answers draw on ``ErrorCode`` (or name a
    field), so a code cannot be added to one API without being added to the set."""
    from vigil import idempotent_requests
    from vigil.jobs import control_api
    from vigil.observers import api as observers_api
    from vigil.tasks import api as tasks_api

    for table in (
        control_api._DOMAIN_ERRORS,
        observers_api._DOMAIN_ERRORS,
        tasks_api._DOMAIN_ERRORS,
        idempotent_requests.ERRORS,
    ):
        for status, code in table.values():
            assert code == INVALID_FIELD or documented(code, [code.removeprefix("invalid_")])
            assert code in ErrorCode.__members__.values() or code.startswith("invalid_"), code
            assert 400 <= status < 600
