"""One key, one request: ``vigil.tasks.enqueue`` and ``vigil tasks enqueue`` refuse a key reused
with another payload, delay, ``at`` or group exactly as ``POST /tasks/{task}`` does
(``KeyReused``, the API's 422 ``idempotency_key_reused``), with nothing sent or written; the same
request again answers the same id, also with nothing sent. (moto; about 2 s in all.)"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.helpers.tasks import ORDERED, PLAIN, Counting, Stack
from tests.tasks.test_api import Api
from tests.tasks.test_cli import Session
from vigil.tasks import KeyReused
from vigil_tools.cli import EXIT_API_ERROR, main

LATER = datetime(2026, 11, 22, 15, 30, tzinfo=UTC)
REUSES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("another payload", PLAIN, {"payload": {"order": "a"}}, {"payload": {"order": "b"}}),
    ("a delay added", PLAIN, {"payload": {}}, {"payload": {}, "delay": 60}),
    ("another delay", PLAIN, {"payload": {}, "delay": 60}, {"payload": {}, "delay": 61}),
    ("the at dropped", PLAIN, {"payload": {}, "at": LATER}, {"payload": {}}),
    ("another group", ORDERED, {"payload": {}, "group": "t-1"}, {"payload": {}, "group": "t-2"}),
]


@pytest.mark.parametrize(
    ("case", "task", "first", "then"), REUSES, ids=[case for case, *_ in REUSES]
)
def test_the_library_refuses_a_key_reused_for_another_request(
    stack: Stack, case: str, task: str, first: dict[str, Any], then: dict[str, Any]
) -> None:
    stack.client().enqueue(task, key="k-1", **first)
    before = stack.items()
    sqs, dynamodb, scheduler = (
        Counting(stack.sqs),
        Counting(stack.dynamodb),
        Counting(stack.scheduler),
    )
    client = stack.client(sqs=sqs, dynamodb=dynamodb, scheduler=scheduler)

    with pytest.raises(KeyReused, match=r"k-1.*different request"):
        client.enqueue(task, key="k-1", **then)

    assert (sqs.calls, scheduler.calls) == ([], [])
    assert set(dynamodb.counts) == {"get_item"}  # the key's record read, nothing written
    assert stack.items() == before


def test_the_same_request_again_answers_its_id_and_sends_nothing(stack: Stack) -> None:
    stack.client().enqueue(PLAIN, {"order": "a"}, key="k-1", delay=60)
    sqs = Counting(stack.sqs)
    assert stack.client(sqs=sqs).enqueue(PLAIN, {"order": "a"}, key="k-1", delay=60.0) == "k-1"
    assert sqs.calls == []


def test_the_api_and_the_library_judge_one_key_alike(stack: Stack) -> None:
    """A key the library used answers the API's retry of the same request with its id, and the
    API's 422 for another one: the digest is computed in one place."""
    api = Api(stack)
    stack.client().enqueue(PLAIN, {"order": "a"}, key="k-1", delay=60)
    status, answer = api(
        "POST", f"/tasks/{PLAIN}", {"payload": {"order": "a"}, "key": "k-1", "delay_seconds": 60}
    )
    assert (status, answer["id"]) == (202, "k-1")
    status, answer = api("POST", f"/tasks/{PLAIN}", {"payload": {"order": "b"}, "key": "k-1"})
    assert (status, answer["error"]) == (422, "idempotency_key_reused")


def test_the_cli_refuses_a_key_reused_for_another_request(stack: Stack) -> None:
    def vigil(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["tasks", *argv], session=Session(stack), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    assert vigil("enqueue", PLAIN, "--payload", '{"order": 1}', "--key", "k-1")[0] == 0
    before = stack.items()
    code, out, err = vigil("enqueue", PLAIN, "--payload", '{"order": 2}', "--key", "k-1")
    assert (code, out) == (EXIT_API_ERROR, "")
    assert "k-1" in err and "different request" in err
    assert stack.items() == before and stack.queued() == 1
