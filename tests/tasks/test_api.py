"""The tasks routes of the management API, as API Gateway delivers them, on moto."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.tasks import ORDERED, PLAIN, Counting, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
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
        event = rest_event(
            method,
            path,
            query=query or None,
            headers={"Content-Type": "application/json", **(headers or {})},
            body=raw if raw is not None else (json.dumps(body) if body is not None else None),
        )
        answer = self.app.resolve(event, LambdaContext())
        return int(answer["statusCode"]), json.loads(answer["body"] or "null")


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


BAD_POSTS: list[tuple[str, str, Any, int, str]] = [
    ("unknown task", "nope", {"payload": {}}, 404, "task_not_found"),
    ("no payload", PLAIN, {}, 422, "invalid_payload"),
    ("payload not an object", PLAIN, {"payload": [1]}, 422, "invalid_payload"),
    ("unknown field", PLAIN, {"payload": {}, "priority": 1}, 422, "invalid_priority"),
    ("bad key", PLAIN, {"payload": {}, "key": "a b"}, 422, "invalid_key"),
    ("key with a slash", PLAIN, {"payload": {}, "key": "tenant/1"}, 422, "invalid_key"),
    ("negative delay", PLAIN, {"payload": {}, "delay_seconds": -1}, 422, "invalid_delay"),
    ("at in the past", PLAIN, {"payload": {}, "at": "2020-01-01T00:00:00Z"}, 422, "invalid_at"),
    ("at not a time", PLAIN, {"payload": {}, "at": "tomorrow"}, 422, "invalid_at"),
    ("group on plain", PLAIN, {"payload": {}, "group": "g"}, 422, "invalid_group"),
    ("delay on ordered", ORDERED, {"payload": {}, "delay_seconds": 5}, 422, "invalid_delay"),
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


def test_cancel_is_200_then_409_once_final_or_running(
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

    batch = [
        r
        for r in records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
        if '"o-2"' in r["body"]
    ]
    invoke(make_handler(cancel_while_running), batch)
    ((status, answer),) = seen
    assert (status, answer["error"]) == (409, "not_cancellable")
    assert "RUNNING" in answer["message"]


def test_the_handler_reads_the_catalog_from_its_environment_and_counts_no_enqueues(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Enqueues are counted by SQS (the queue's NumberOfMessagesSent, on the dashboard), which
    sees every one: a count here would see the API's alone, not an application's boto3 ones."""
    from handlers import tasks_api

    monkeypatch.setenv("VIGIL_TASKS_CATALOG", stack.catalog.to_json())
    monkeypatch.setattr(tasks_api, "_app", None)
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
