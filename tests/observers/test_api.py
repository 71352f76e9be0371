"""The management API through its real Lambda handler, on moto: routes, errors, idempotency."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from handlers import observers_api
from tests.helpers.api_errors import Refusal, check_refusals
from tests.helpers.observers import (
    IDEMPOTENCY_TABLE,
    REGISTRY_TABLE,
    leave_uncertain,
    registry_key,
    scan_all,
)
from tests.helpers.rest import send_json
from vigil.observers.api import ApiSettings
from vigil.settings import SettingsError

from .test_registry import raw_item

Call = Callable[..., tuple[int, Any]]


@pytest.fixture
def call(api_env: None) -> Call:
    def invoke(
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: str | None = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
        caller: str = "arn:aws:iam::123456789012:user/alice",
    ) -> tuple[int, Any]:
        return send_json(
            observers_api.handler,
            method,
            path,
            body,
            raw=raw,
            headers=headers,
            query=query,
            caller=caller,
        )

    return invoke


@pytest.fixture
def tables(dynamodb: Any) -> Callable[[], tuple[list[Any], list[Any]]]:
    return lambda: (scan_all(dynamodb, REGISTRY_TABLE), scan_all(dynamodb, IDEMPOTENCY_TABLE))


def test_given_the_fleet_kinds_when_listed_then_sorted_names(call: Call) -> None:
    assert call("GET", "/kinds") == (200, {"kinds": ["price-watch", "ticker"]})


def test_given_a_valid_body_when_posted_then_201_with_the_observer(call: Call) -> None:
    status, body = call("POST", "/observers", {"name": "btc", "kind": "ticker", "config": {"a": 1}})

    assert status == 201
    assert body["name"] == "btc" and body["kind"] == "ticker" and body["config"] == {"a": 1}
    assert (body["status"], body["desired"], body["generation"]) == ("PENDING", "RUNNING", 0)
    expected_keys = {
        "name", "kind", "config", "desired", "status", "task_arn", "generation", "restarts",
        "heartbeat_at", "created_at", "updated_at", "last_exit",
    }  # fmt: skip
    assert expected_keys <= set(body)
    assert call("GET", "/observers/btc") == (200, body)


@pytest.mark.parametrize(
    ("raw", "status", "code", "mentions"),
    [
        ('{"name": "x", "kind": ', 400, "invalid_json", "not JSON"),
        ('["a list"]', 422, "invalid_body", "body"),
        ('{"kind": "ticker"}', 422, "invalid_name", "name"),
        ('{"name": "Has Spaces", "kind": "ticker"}', 422, "invalid_name", "pattern"),
        ('{"name": "' + "a" * 64 + '", "kind": "ticker"}', 422, "invalid_name", "name"),
        ('{"name": "ok", "kind": "nope"}', 422, "unknown_kind", "nope"),
        ('{"name": "ok"}', 422, "invalid_kind", "kind"),
        ('{"name": "ok", "kind": "ticker", "config": [1]}', 422, "invalid_config", "config"),
        ('{"name": "ok", "kind": "ticker", "config": "x"}', 422, "invalid_config", "config"),
        # A field the route does not take: the body is wrong; the message names the field.
        ('{"name": "ok", "kind": "ticker", "confg": {}}', 422, "invalid_body", "confg"),
        (
            json.dumps({"name": "ok", "kind": "ticker", "config": {"x": "y" * 33_000}}),
            422,
            "invalid_config",
            "32768",
        ),
    ],
)
def test_given_a_bad_body_when_posted_then_a_clear_error_and_nothing_written(
    call: Call,
    tables: Callable[[], tuple[list[Any], list[Any]]],
    raw: str,
    status: int,
    code: str,
    mentions: str,
) -> None:
    answer_status, body = call(
        "POST", "/observers", raw=raw, headers={"Idempotency-Key": "k-" + code}
    )

    assert (answer_status, body["error"]) == (status, code)
    assert mentions in body["message"]
    assert tables() == ([], [])


def test_given_an_existing_name_when_posted_then_409_and_the_first_stays(
    call: Call, tables: Callable[[], tuple[list[Any], list[Any]]]
) -> None:
    call("POST", "/observers", {"name": "btc", "kind": "ticker", "config": {"v": 1}})
    before = tables()

    status, body = call("POST", "/observers", {"name": "btc", "kind": "ticker", "config": {"v": 2}})

    assert (status, body["error"]) == (409, "observer_exists")
    assert "btc" in body["message"]
    assert tables() == before


def test_given_a_full_fleet_when_posted_then_429_and_nothing_written(
    call: Call, tables: Callable[[], tuple[list[Any], list[Any]]]
) -> None:
    call("POST", "/observers", {"name": "a", "kind": "ticker"})
    call("POST", "/observers", {"name": "b", "kind": "ticker"})
    before = tables()

    status, body = call(
        "POST", "/observers", {"name": "c", "kind": "ticker"}, headers={"Idempotency-Key": "c1"}
    )

    assert (status, body["error"]) == (429, "fleet_full")
    assert "maximum of 2" in body["message"]
    assert tables() == before


def test_given_an_idempotency_key_when_the_same_request_is_retried_then_the_first_answer_replays(
    call: Call, dynamodb: Any
) -> None:
    request = {"name": "btc", "kind": "ticker", "config": {"a": 1}}
    first = call("POST", "/observers", request, headers={"Idempotency-Key": "retry-1"})
    call("DELETE", "/observers/btc")  # the observer changes; the replay is still the first answer

    again = call("POST", "/observers", request, headers={"idempotency-key": "retry-1"})

    assert first[0] == 201 and again == first
    assert len(scan_all(dynamodb, IDEMPOTENCY_TABLE)) == 1


def test_given_an_idempotency_key_when_reused_with_another_body_then_422(call: Call) -> None:
    call("POST", "/observers", {"name": "btc", "kind": "ticker"}, headers={"Idempotency-Key": "k"})

    status, body = call(
        "POST", "/observers", {"name": "eth", "kind": "ticker"}, headers={"Idempotency-Key": "k"}
    )

    assert (status, body["error"]) == (422, "idempotency_key_reused")
    assert call("GET", "/observers/eth")[0] == 404


def test_given_the_same_key_from_another_caller_when_posted_then_it_is_a_new_request(
    call: Call,
) -> None:
    call("POST", "/observers", {"name": "btc", "kind": "ticker"}, headers={"Idempotency-Key": "k"})

    status, body = call(
        "POST",
        "/observers",
        {"name": "eth", "kind": "ticker"},
        headers={"Idempotency-Key": "k"},
        caller="arn:aws:iam::123456789012:user/bob",
    )

    assert (status, body["name"]) == (201, "eth")


def test_given_a_refused_create_with_a_key_when_retried_then_refused_again_not_replayed(
    call: Call, dynamodb: Any
) -> None:
    call("POST", "/observers", {"name": "btc", "kind": "ticker"})
    conflict = call(
        "POST", "/observers", {"name": "btc", "kind": "ticker"}, headers={"Idempotency-Key": "z"}
    )
    call("DELETE", "/observers/btc")

    assert conflict[0] == 409
    assert scan_all(dynamodb, IDEMPOTENCY_TABLE) == []  # failures are not remembered


def test_given_observers_when_listed_with_a_filter_then_only_that_status(call: Call) -> None:
    call("POST", "/observers", {"name": "a", "kind": "ticker"})
    call("POST", "/observers", {"name": "b", "kind": "ticker"})
    call("DELETE", "/observers/b")

    everything = call("GET", "/observers")
    stopped = call("GET", "/observers", query={"status": "STOPPED"})

    assert [o["name"] for o in everything[1]["observers"]] == ["a", "b"]
    assert everything[1]["next_cursor"] is None
    assert [o["name"] for o in stopped[1]["observers"]] == ["b"]


@pytest.mark.parametrize(
    ("query", "code"),
    [({"status": "SLEEPING"}, "invalid_status"), ({"limit": "0"}, "invalid_limit")],
)
def test_given_a_bad_filter_when_listed_then_422(
    call: Call, query: dict[str, str], code: str
) -> None:
    status, body = call("GET", "/observers", query=query)

    assert (status, body["error"]) == (422, code)


@pytest.mark.parametrize(
    "cursor",
    [
        "%%%",
        base64.urlsafe_b64encode(b'{"name": 1, "fleet": 2}').decode(),
        base64.urlsafe_b64encode(b'{"name": {"N": "1"}, "fleet": {"S": "observers"}}').decode(),
        base64.urlsafe_b64encode(b'{"name": {"S": "a"}, "fleet": {"S": "elsewhere"}}').decode(),
    ],
)
def test_given_a_forged_cursor_when_listed_then_400(call: Call, cursor: str) -> None:
    call("POST", "/observers", {"name": "a", "kind": "ticker"})

    status, body = call("GET", "/observers", query={"cursor": cursor})

    assert (status, body["error"]) == (400, "invalid_cursor")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/observers/ghost"),
        ("DELETE", "/observers/ghost"),
        ("POST", "/observers/ghost/restart"),
    ],
)
def test_given_an_unknown_observer_when_addressed_then_404(
    call: Call, method: str, path: str
) -> None:
    status, body = call(method, path)

    assert (status, body["error"]) == (404, "observer_not_found")
    assert "ghost" in body["message"]


def test_given_an_invalid_name_in_the_path_when_addressed_then_422(call: Call) -> None:
    status, body = call("GET", "/observers/Not_Valid")

    assert (status, body["error"]) == (422, "invalid_name")


def test_given_a_running_observer_when_deleted_then_202_and_stopping_or_stopped(
    call: Call,
) -> None:
    call("POST", "/observers", {"name": "btc", "kind": "ticker"})

    status, body = call("DELETE", "/observers/btc")

    assert status == 202 and body["desired"] == "STOPPED" and body["status"] == "STOPPED"
    assert call("DELETE", "/observers/btc")[0] == 202  # stopping twice is fine


def test_given_a_stopped_observer_when_restarted_then_202_and_wanted_again(call: Call) -> None:
    call("POST", "/observers", {"name": "btc", "kind": "ticker"})
    call("DELETE", "/observers/btc")

    status, body = call("POST", "/observers/btc/restart")

    assert status == 202 and (body["desired"], body["status"]) == ("RUNNING", "PENDING")


def test_given_an_unknown_route_when_called_then_404_json(call: Call) -> None:
    status, body = call("GET", "/nothing-here")

    assert (status, body["error"]) == (404, "no_such_route")


def test_given_the_api_when_asked_for_openapi_then_every_route_is_described(call: Call) -> None:
    status, schema = call("GET", "/openapi")

    assert status == 200 and schema["info"]["title"] == "Vigil observers"
    paths = schema["paths"]
    assert set(paths) >= {"/kinds", "/observers", "/observers/{name}", "/observers/{name}/restart"}
    assert set(paths["/observers/{name}"]) == {"get", "delete"}
    create = paths["/observers"]["post"]
    assert "Idempotency-Key" in json.dumps(create["parameters"])
    assert "CreateObserver" in json.dumps(schema["components"]["schemas"])
    assert {"201", "400", "409", "422", "429"} <= set(create["responses"])
    assert "ObserverBody" in json.dumps(create["responses"]["201"])
    assert "ErrorBody" in json.dumps(paths["/observers/{name}"]["get"]["responses"]["404"])
    assert schema["security"] == [{"sigv4": []}]


def test_given_a_missing_setting_when_invoked_then_it_fails_loudly(
    call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VIGIL_IDEMPOTENCY_TABLE")

    with pytest.raises(ValueError, match="VIGIL_IDEMPOTENCY_TABLE"):
        call("GET", "/kinds")


@pytest.mark.parametrize(
    "number",
    ["NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 41, "1e-200", "1e126", "1e-131"],
)
def test_given_a_config_number_dynamodb_cannot_store_when_posted_then_422_and_nothing_written(
    call: Call, tables: Callable[[], tuple[list[Any], list[Any]]], number: str
) -> None:
    raw = '{"name": "ok", "kind": "ticker", "config": {"threshold": [1, ' + number + "]}}"

    status, body = call("POST", "/observers", raw=raw, headers={"Idempotency-Key": number})

    assert (status, body["error"]) == (422, "invalid_config")
    assert "number" in body["message"]
    assert tables() == ([], [])


def test_the_api_environment_is_read_once_and_a_bad_one_names_the_variable() -> None:
    env = {
        "VIGIL_REGISTRY_TABLE": "observers",
        "VIGIL_IDEMPOTENCY_TABLE": "idempotency",
        "VIGIL_OBSERVER_KINDS": '{"ticker": "observers.ticker.run"}',
        "VIGIL_MAX_OBSERVERS": "3",
    }
    settings = ApiSettings.from_env(env)
    assert (settings.max_observers, settings.kinds) == (3, {"ticker": "observers.ticker.run"})
    for name, bad in [
        ("VIGIL_MAX_OBSERVERS", "0"),
        ("VIGIL_MAX_OBSERVERS", "many"),
        ("VIGIL_OBSERVER_KINDS", "[]"),
        ("VIGIL_IDEMPOTENCY_TABLE", ""),
    ]:
        with pytest.raises(SettingsError, match=name):
            ApiSettings.from_env({**env, name: bad})


OBSERVER_REFUSALS = [
    Refusal("POST", "/observers", "/observers", raw="{nope"),
    Refusal("POST", "/observers", "/observers", {"name": "Bad_Name", "kind": "ticker"}),
    Refusal("POST", "/observers", "/observers", {"name": "x", "kind": "nope"}),
    Refusal("POST", "/observers", "/observers", {"name": "btc", "kind": "ticker"}),
    Refusal(
        "POST",
        "/observers",
        "/observers",
        {"name": "eth", "kind": "ticker"},
        headers={"Idempotency-Key": "k"},
    ),
    Refusal(
        "POST",
        "/observers",
        "/observers",
        {"name": "eth", "kind": "ticker"},
        headers={"Content-Type": "text/plain"},
    ),
    Refusal("GET", "/observers", "/observers", query={"status": "NOPE"}),
    Refusal("GET", "/observers", "/observers", query={"cursor": "garbage"}),
    Refusal("GET", "/observers", "/observers", query={"limit": "0"}),
    Refusal("GET", "/observers/{name}", "/observers/nope"),
    Refusal("GET", "/observers/{name}", "/observers/Bad_Name"),
    Refusal("DELETE", "/observers/{name}", "/observers/nope"),
    Refusal("POST", "/observers/{name}/restart", "/observers/nope/restart"),
    Refusal(
        "POST",
        "/observers/{name}/settle",
        "/observers/nope/settle",
        {"effect": "e", "outcome": "done"},
    ),
    Refusal(
        "POST",
        "/observers/{name}/settle",
        "/observers/btc/settle",
        {"effect": "e", "outcome": "done"},
    ),
    Refusal("POST", "/observers/{name}/settle", "/observers/btc/settle", {"effect": "e"}),
    Refusal("POST", "/observers/rebalance", "/observers/rebalance", {"kind": "nope"}),
    Refusal("POST", "/observers/rebalance", "/observers/rebalance", {"kind": "ticker"}),
    Refusal("POST", "/observers/rebalance", "/observers/rebalance", {"kind": "ticker", "max": 0}),
    Refusal("GET", "/hosts", "/hosts", query={"kind": "nope"}),
    Refusal("GET", "/hosts", "/hosts", query={"kind": "Bad Kind!"}),
]


def test_every_routes_refusals_use_the_documented_codes(call: Call) -> None:
    """One set of codes across the APIs (``vigil.contract.api_errors``), route by route."""
    call("POST", "/observers", {"name": "btc", "kind": "ticker"}, headers={"Idempotency-Key": "k"})

    def send(refusal: Refusal) -> tuple[int, Any]:
        return call(
            refusal.method,
            refusal.path,
            refusal.body,
            raw=refusal.raw,
            headers=refusal.headers,
            query=refusal.query or None,
        )

    codes = check_refusals(observers_api.app(), send, OBSERVER_REFUSALS)
    assert codes == [
        "invalid_json",
        "invalid_name",
        "unknown_kind",
        "observer_exists",
        "idempotency_key_reused",
        "unsupported_media_type",
        "invalid_status",
        "invalid_cursor",
        "invalid_limit",
        "observer_not_found",
        "invalid_name",
        "observer_not_found",
        "observer_not_found",
        "observer_not_found",
        "not_settleable",
        "invalid_outcome",
        "kind_not_found",
        "nothing_to_rebalance",
        "invalid_max",
        "unknown_kind",
        "invalid_kind",
    ]


# -- POST /observers/{name}/settle ----------------------------------------------------------------


@pytest.fixture
def uncertain(call: Call, dynamodb: Any) -> str:
    """``btc``, FAILED: generation 1 stopped UNCERTAIN on ``page:incident-7``."""
    call("POST", "/observers", {"name": "btc", "kind": "ticker"})
    leave_uncertain(dynamodb, REGISTRY_TABLE, "btc", "page:incident-7", generation=1)
    return "btc"


@pytest.mark.parametrize(("outcome", "entry"), [("done", "DONE"), ("not_done", None)])
def test_given_an_uncertain_observer_when_settled_then_the_journal_takes_it_and_it_restarts(
    call: Call, dynamodb: Any, uncertain: str, outcome: str, entry: str | None
) -> None:
    status, body = call("GET", "/observers/btc")  # the GET shows what to settle
    assert (status, body["uncertain_effect"]) == (200, "page:incident-7")
    assert "never recorded done" in body["uncertain_reason"]

    status, body = call(
        "POST", "/observers/btc/settle", {"effect": "page:incident-7", "outcome": outcome}
    )

    assert status == 202
    assert (body["status"], body["desired"], body["uncertain_effect"]) == (
        "PENDING",
        "RUNNING",
        None,
    )
    item = raw_item(dynamodb, REGISTRY_TABLE, "btc")
    assert "uncertain_effect" not in item and "uncertain_reason" not in item
    assert "failure_reason" not in item and item["restart_generation"] == 1
    assert (item["effects"].get("page:incident-7") or {}).get("state") == entry


@pytest.mark.parametrize(
    ("name", "body", "status", "code", "mentions"),
    [
        ("ghost", {"effect": "e", "outcome": "done"}, 404, "observer_not_found", "ghost"),
        ("btc", {"effect": "other", "outcome": "done"}, 409, "not_settleable", "page:incident-7"),
        ("btc", {"effect": "page:incident-7", "outcome": "maybe"}, 422, "invalid_outcome", ""),
        ("btc", {"effect": "no spaces", "outcome": "done"}, 422, "invalid_effect", ""),
        ("btc", {"outcome": "done"}, 422, "invalid_effect", ""),
        ("btc", {"effect": "e", "outcome": "done", "extra": 1}, 422, "invalid_body", ""),
    ],
)
def test_given_a_settlement_that_cannot_be_when_posted_then_refused_and_nothing_changes(
    call: Call,
    uncertain: str,
    tables: Callable[[], tuple[list[Any], list[Any]]],
    name: str,
    body: Any,
    status: int,
    code: str,
    mentions: str,
) -> None:
    before = tables()

    answer = call("POST", f"/observers/{name}/settle", body)

    assert (answer[0], answer[1]["error"]) == (status, code)
    assert mentions in answer[1]["message"]
    assert tables() == before


def test_given_an_observer_that_is_not_uncertain_when_settled_then_409(call: Call) -> None:
    call("POST", "/observers", {"name": "eth", "kind": "ticker"})

    status, body = call("POST", "/observers/eth/settle", {"effect": "e", "outcome": "done"})

    assert (status, body["error"]) == (409, "not_settleable")
    assert "not uncertain" in body["message"]


def test_given_a_settled_observer_when_settled_again_then_409_and_it_stays_settled_once(
    call: Call, dynamodb: Any, uncertain: str
) -> None:
    settle = {"effect": "page:incident-7", "outcome": "done"}
    assert call("POST", "/observers/btc/settle", settle)[0] == 202

    status, body = call("POST", "/observers/btc/settle", settle)

    assert (status, body["error"]) == (409, "not_settleable")


def test_given_a_generation_that_moved_on_meanwhile_when_settled_then_409_nothing_changes(
    dynamodb: Any, registry: Any, registry_table: str
) -> None:
    """The record changed between the settlement's read and its write: the generation
    condition refuses the write, and the re-read says why."""
    from vigil.settle import NotSettleable

    registry.create("sol", "ticker", {})
    leave_uncertain(dynamodb, registry_table, "sol", "page:x", generation=1)
    real_get = registry.get
    reads = []

    def get_then_move_on(name: str) -> Any:
        observer = real_get(name)
        if not reads:  # after the first read: a newer generation went uncertain on it too
            leave_uncertain(dynamodb, registry_table, "sol", "page:x", generation=2)
        reads.append(observer.generation)
        return observer

    registry.get = get_then_move_on
    with pytest.raises(NotSettleable, match="from generation 1 to 2 meanwhile"):
        registry.request_settle("sol", "page:x", done=True)
    assert reads == [1, 2]
    assert registry.get("sol").uncertain_effect == "page:x"


def test_given_an_uncertain_generation_still_running_when_settled_then_409_until_it_failed(
    call: Call, dynamodb: Any, uncertain: str
) -> None:
    """Its exit (code 4) is still on its way to the reconciler, which would mark it FAILED
    after a settlement's restart: the settlement waits for it."""
    dynamodb.update_item(
        TableName=REGISTRY_TABLE,
        Key=registry_key(dynamodb, REGISTRY_TABLE, "btc"),
        UpdateExpression="SET #s = :running",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":running": {"S": "RUNNING"}},
    )

    status, body = call(
        "POST", "/observers/btc/settle", {"effect": "page:incident-7", "outcome": "done"}
    )

    assert (status, body["error"]) == (409, "not_settleable")
    assert "still RUNNING" in body["message"]
    assert raw_item(dynamodb, REGISTRY_TABLE, "btc")["uncertain_effect"] == "page:incident-7"
