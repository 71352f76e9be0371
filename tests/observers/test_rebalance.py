"""``POST /observers/rebalance`` and ``vigil observers rebalance``: the request marker, and every
refusal (nothing written for any of them)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from handlers import observers_api
from tests.helpers.observers import HOSTS_TABLE, create_hosts_table, scan_all
from vigil.clock import ManualClock
from vigil.contract.hosts import HOSTS_TABLE_ENV, PLACEMENTS_ENV
from vigil.dynamo import from_wire
from vigil.observers.rebalance_requests import (
    RebalanceRequests,
    is_rebalance_item,
    request_from_item,
)
from vigil_tools.api_client import InProcessTransport, rest_event
from vigil_tools.cli import EXIT_API_ERROR, EXIT_OK, EXIT_USAGE, main
from vigil_tools.lambda_context import LambdaContext

ALICE = "arn:aws:iam::123456789012:user/alice"


@pytest.fixture
def pooled_env(api_env: None, dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The API with price-watch pooled (ticker stays dedicated) and the hosts table."""
    create_hosts_table(dynamodb)
    monkeypatch.setenv(PLACEMENTS_ENV, json.dumps({"price-watch": {"placement": "pooled"}}))
    monkeypatch.setenv(HOSTS_TABLE_ENV, HOSTS_TABLE)
    return dynamodb


def post(body: Any = None, raw: str | None = None) -> tuple[int, Any]:
    text = raw if raw is not None else json.dumps(body)
    event = rest_event(
        "POST",
        "/observers/rebalance",
        headers={"Content-Type": "application/json"},
        body=text,
        caller_arn=ALICE,
    )
    answer = observers_api.handler(event, LambdaContext())
    return int(answer["statusCode"]), json.loads(answer["body"])


def markers(dynamodb: Any) -> list[dict[str, Any]]:
    items = [from_wire(i) or {} for i in scan_all(dynamodb, HOSTS_TABLE)]
    return [i for i in items if is_rebalance_item(i)]


def test_a_pooled_kind_gets_a_request_marker_naming_the_caller(pooled_env: Any) -> None:
    status, body = post({"kind": "price-watch", "max": 3})
    assert status == 202
    assert (body["kind"], body["max"], body["requested_by"]) == ("price-watch", 3, ALICE)
    (marker,) = markers(pooled_env)
    assert request_from_item(marker).to_json() == body
    # a later request replaces it; without max the default applies
    status, body = post({"kind": "price-watch"})
    assert status == 202 and body["max"] == 10
    (marker,) = markers(pooled_env)
    assert marker["max_moves"] == 10


def test_a_dedicated_kind_has_nothing_to_rebalance(pooled_env: Any) -> None:
    status, body = post({"kind": "ticker", "max": 3})
    assert status == 409 and body["error"] == "nothing_to_rebalance"
    assert "dedicated" in body["message"]
    assert markers(pooled_env) == []


def test_an_unknown_kind_is_not_found(pooled_env: Any) -> None:
    status, body = post({"kind": "nope"})
    assert status == 404 and body["error"] == "kind_not_found" and "nope" in body["message"]
    assert markers(pooled_env) == []


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        ('{"kind": "price-watch", "max": 0}', 422, "invalid_max"),
        ('{"kind": "price-watch", "max": 1001}', 422, "invalid_max"),
        ('{"kind": "price-watch", "max": -2}', 422, "invalid_max"),
        ('{"kind": "price-watch", "max": 2.5}', 422, "invalid_max"),
        ('{"kind": "price-watch", "max": "5"}', 422, "invalid_max"),
        ('{"kind": "price-watch", "max": true}', 422, "invalid_max"),
        ('{"kind": "price-watch", "max": null}', 422, "invalid_max"),
        ('{"max": 3}', 422, "invalid_kind"),
        ('{"kind": ""}', 422, "invalid_kind"),
        ('{"kind": 7}', 422, "invalid_kind"),
        ('{"kind": "price-watch", "hosts": 2}', 422, "invalid_body"),  # not a field it takes
        ('["price-watch"]', 422, "invalid_body"),
        ('{"kind": ', 400, "invalid_json"),
    ],
)
def test_bad_input_is_refused_clearly_and_writes_nothing(
    pooled_env: Any, raw: str, status: int, code: str
) -> None:
    answer, body = post(raw=raw)
    assert (answer, body["error"]) == (status, code)
    assert body["message"]
    assert markers(pooled_env) == []


def test_the_reconciler_clears_only_the_request_it_acted_on(pooled_env: Any) -> None:
    clock = ManualClock(datetime(2026, 11, 23, 12, 0, tzinfo=UTC))
    requests = RebalanceRequests(pooled_env, HOSTS_TABLE)
    first = requests.request("price-watch", 5, ALICE, clock())
    clock.advance(timedelta(seconds=1))
    newer = requests.request("price-watch", 7, ALICE, clock())
    assert requests.clear(first) is False
    assert [m["max_moves"] for m in markers(pooled_env)] == [7]
    assert requests.clear(newer) is True
    assert markers(pooled_env) == []


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    transport = InProcessTransport(observers_api.handler)
    code = main(list(argv), transport=transport, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_cli_requests_a_rebalance(pooled_env: Any) -> None:
    code, out, _ = cli("observers", "rebalance", "price-watch", "--max", "4")
    assert code == EXIT_OK
    assert out.startswith("rebalance of price-watch requested: at most 4 observers move")
    assert markers(pooled_env)[0]["max_moves"] == 4


@pytest.mark.parametrize("value", ["0", "1001", "x", "2.5", "-1"])
def test_the_cli_refuses_a_bad_max_before_calling(pooled_env: Any, value: str) -> None:
    code, out, err = cli("observers", "rebalance", "price-watch", "--max", value)
    assert code == EXIT_USAGE and out == "" and "--max" in err
    assert markers(pooled_env) == []


def test_the_cli_says_why_a_dedicated_kind_is_refused(pooled_env: Any) -> None:
    code, _, err = cli("observers", "rebalance", "ticker")
    assert code == EXIT_API_ERROR
    assert "dedicated" in err and "nothing_to_rebalance" in err and "409" in err


def test_the_cli_needs_a_kind(pooled_env: Any) -> None:
    code, _, err = cli("observers", "rebalance")
    assert code == EXIT_USAGE and "kind" in err
