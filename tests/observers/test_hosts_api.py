"""``GET /hosts``, the host of ``GET /observers/{name}``, and ``vigil hosts list``, on moto."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest

from handlers import observers_api
from tests.helpers.observers import HOSTS_TABLE, REGISTRY_TABLE, create_hosts_table, registry_key
from vigil.clock import ManualClock
from vigil.contract.hosts import HOSTS_TABLE_ENV, PLACEMENTS_ENV, HostStatus
from vigil.dynamo import to_wire
from vigil.observers.fleet_store import FleetStore
from vigil.observers.host_fleet.store import HostStore
from vigil_tools.api_client import InProcessTransport, rest_event
from vigil_tools.cli import main
from vigil_tools.lambda_context import LambdaContext

DEFINITION = "arn:aws:ecs:us-east-1:123456789012:task-definition/vigil-pooled:7"
PLACEMENTS = {
    "ticker": {"placement": "dedicated"},
    "pooled-ticker": {"placement": "pooled", "slots_per_host": 3, "headroom": 1},
}


@pytest.fixture
def hosts(
    api_env: None, dynamodb: Any, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> HostStore:
    create_hosts_table(dynamodb)
    monkeypatch.setenv(HOSTS_TABLE_ENV, HOSTS_TABLE)
    monkeypatch.setenv(PLACEMENTS_ENV, json.dumps(PLACEMENTS))
    monkeypatch.setenv(
        "VIGIL_OBSERVER_KINDS",
        json.dumps({"ticker": "observers.ticker.run", "pooled-ticker": "observers.ticker.run"}),
    )
    store = HostStore(dynamodb, HOSTS_TABLE)
    now = clock()
    one = store.create("pooled-ticker-h1", "pooled-ticker", 3, DEFINITION, now)
    one = store.record_task(one, "arn:aws:ecs:us-east-1:123456789012:task/c/h1", now)
    one = store.assign(one, "a", 1)
    store.assign(one, "b", 1)
    two = store.create("pooled-ticker-h2", "pooled-ticker", 3, DEFINITION, now)
    store.mark(two, HostStatus.LOST, "no heartbeat", now=now)
    dynamodb.update_item(
        TableName=HOSTS_TABLE,
        Key=to_wire({"host_id": "pooled-ticker-h1"}),
        UpdateExpression="SET heartbeat_at_ms = :t",
        ExpressionAttributeValues=to_wire(
            {":t": int((now - timedelta(seconds=12)).timestamp() * 1000)}
        ),
    )
    return store


def call(path: str, query: dict[str, str] | None = None) -> tuple[int, Any]:
    answer = observers_api.handler(rest_event("GET", path, query=query), LambdaContext())
    return int(answer["statusCode"]), json.loads(answer["body"])


def create_observer(name: str, kind: str) -> None:
    answer = observers_api.handler(
        rest_event(
            "POST",
            "/observers",
            headers={"Content-Type": "application/json"},
            body=json.dumps({"name": name, "kind": kind}),
        ),
        LambdaContext(),
    )
    assert answer["statusCode"] == 201


def test_hosts_are_listed_with_slots_revision_and_heartbeat_age(hosts: HostStore) -> None:
    status, body = call("/hosts", {"kind": "pooled-ticker"})
    assert status == 200
    first, second = body["hosts"]
    assert first["id"] == "pooled-ticker-h1" and first["status"] == "STARTING"
    assert (first["used"], first["free"], first["slots"], first["revision"]) == (2, 1, 3, 7)
    assert first["task_arn"].endswith("/h1") and first["observers"] == {"a": 1, "b": 1}
    assert first["heartbeat_age_seconds"] is not None and first["heartbeat_age_seconds"] >= 0
    assert (second["status"], second["heartbeat_age_seconds"]) == ("LOST", None)
    every_kind = call("/hosts")[1]["hosts"]
    assert [h["id"] for h in every_kind] == [first["id"], second["id"]]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"kind": "nope"}, "unknown_kind"),
        ({"kind": "ticker"}, "not_pooled"),
        ({"kind": "Bad Kind!"}, "invalid_kind"),
    ],
)
def test_bad_host_queries_are_refused_clearly(
    hosts: HostStore, query: dict[str, str], code: str
) -> None:
    status, body = call("/hosts", query)
    assert status == 422
    assert body["error"].startswith(code.split("_")[0]) and body["message"]
    if code != "invalid_kind":
        assert body["error"] == code and query["kind"] in body["message"]


def test_an_observer_names_its_host_and_a_dedicated_one_null(
    hosts: HostStore, dynamodb: Any
) -> None:
    for name, kind in (("a", "pooled-ticker"), ("d", "ticker")):
        create_observer(name, kind)
    dynamodb.update_item(
        TableName=REGISTRY_TABLE,
        Key=registry_key(dynamodb, REGISTRY_TABLE, "a"),
        UpdateExpression="SET host = :h, task_definition = :d, task_arn = :t",
        ExpressionAttributeValues=to_wire(
            {":h": "pooled-ticker-h1", ":d": DEFINITION, ":t": "arn:t"}
        ),
    )
    pooled = call("/observers/a")[1]
    assert (pooled["host"], pooled["task_definition"], pooled["task_arn"]) == (
        "pooled-ticker-h1",
        DEFINITION,
        "arn:t",
    )
    dedicated = call("/observers/d")[1]
    assert dedicated["host"] is None and "task_definition" in dedicated
    # vigil observers list shows the host column once some observer is pooled
    out = io.StringIO()
    assert (
        main(["observers", "list"], transport=InProcessTransport(observers_api.handler), stdout=out)
        == 0
    )
    header, *rows = out.getvalue().splitlines()
    assert header.split()[-1] == "HOST"
    assert any(r.split()[0] == "a" and r.split()[-1] == "pooled-ticker-h1" for r in rows)


def test_vigil_hosts_list_prints_the_table_and_refuses_a_dedicated_kind(hosts: HostStore) -> None:
    transport = InProcessTransport(observers_api.handler)
    out, err = io.StringIO(), io.StringIO()
    assert main(["hosts", "list", "--kind", "pooled-ticker"], transport=transport, stdout=out) == 0
    header, *rows = out.getvalue().splitlines()
    assert header.split()[:5] == ["ID", "KIND", "STATUS", "USED", "FREE"]
    assert [r.split()[0] for r in rows if r.strip() and not set(r) <= {"-", " "}] == [
        "pooled-ticker-h1",
        "pooled-ticker-h2",
    ]
    assert main(["hosts", "list", "--kind", "ticker"], transport=transport, stderr=err) == 1
    assert "not_pooled" in err.getvalue() and "dedicated" in err.getvalue()
    out = io.StringIO()
    assert main(["--json", "hosts", "list"], transport=transport, stdout=out) == 0
    assert len(json.loads(out.getvalue())) == 2


@pytest.mark.parametrize("status", [HostStatus.LOST, HostStatus.STOPPED])
def test_a_dead_host_lists_no_observers_while_each_observer_names_where_it_is_now(
    hosts: HostStore, dynamodb: Any, clock: ManualClock, status: HostStatus
) -> None:
    # Given "a" placed on h3, whose task then died: the manager moved "a" to h1 and marked h3
    # dead, leaving h3's last assignment on its item
    dead = hosts.assign(
        hosts.create("pooled-ticker-h3", "pooled-ticker", 3, DEFINITION, clock()), "a", 1
    )
    hosts.mark(dead, status, "its task stopped", now=clock())
    create_observer("a", "pooled-ticker")
    dynamodb.update_item(
        TableName=REGISTRY_TABLE,
        Key=registry_key(dynamodb, REGISTRY_TABLE, "a"),
        UpdateExpression="SET host = :h",
        ExpressionAttributeValues=to_wire({":h": "pooled-ticker-h1"}),
    )

    # When the hosts are listed, through the API and the CLI
    listed = {h["id"]: h for h in call("/hosts", {"kind": "pooled-ticker"})[1]["hosts"]}
    out = io.StringIO()
    transport = InProcessTransport(observers_api.handler)
    assert main(["hosts", "list"], transport=transport, stdout=out) == 0

    # Then the dead host shows nothing on it, and the observer says where it is
    assert listed["pooled-ticker-h3"]["status"] == status.value
    assert listed["pooled-ticker-h3"]["observers"] == {}
    assert (listed["pooled-ticker-h3"]["used"], listed["pooled-ticker-h3"]["free"]) == (0, 0)
    assert listed["pooled-ticker-h1"]["observers"] == {"a": 1, "b": 1}  # a live host's stay
    header, *rows = out.getvalue().splitlines()
    columns = header.split()
    row = next(r.split() for r in rows if r.startswith("pooled-ticker-h3"))
    assert row[columns.index("USED")] == "0" and row[columns.index("FREE")] == "0"
    assert call("/observers/a")[1]["host"] == "pooled-ticker-h1"


def test_a_waiting_pooled_observer_shows_why_in_the_api_and_the_cli(
    hosts: HostStore, dynamodb: Any, clock: ManualClock
) -> None:
    # Given a pooled observer the manager could not place yet, the reason written on its record
    # as the reconciler writes it
    create_observer("a", "pooled-ticker")
    store = FleetStore(dynamodb, REGISTRY_TABLE, pooled_kinds=frozenset({"pooled-ticker"}))
    record = store.get("a")
    assert record is not None
    reason = "waiting for a host: RunTask failed: RESOURCE:CPU; retrying"
    store.record_start_failure(record, reason, clock() + timedelta(seconds=30), clock())

    # When it is read through the API and the CLI
    one = call("/observers/a")[1]
    listed = call("/observers")[1]["observers"]
    transport = InProcessTransport(observers_api.handler)
    table, details = io.StringIO(), io.StringIO()
    assert main(["observers", "list"], transport=transport, stdout=table) == 0
    assert main(["observers", "get", "a"], transport=transport, stdout=details) == 0

    # Then each shows the reason
    assert one["status_reason"] == reason
    assert [o["status_reason"] for o in listed] == [reason]
    header, *rows = table.getvalue().splitlines()
    assert header.split()[-1] == "REASON" and rows[-1].rstrip().endswith(reason)
    assert any(
        line.split(None, 1) == ["status_reason", reason] for line in details.getvalue().splitlines()
    )


@pytest.mark.parametrize(
    ("kind", "code"), [("nope", "unknown_kind"), ("Bad Kind!", "invalid_kind")]
)
def test_vigil_hosts_list_with_an_unknown_kind_names_the_kinds_that_exist(
    hosts: HostStore, kind: str, code: str
) -> None:
    # When an operator asks for the hosts of a kind this fleet does not have
    status, body = call("/hosts", {"kind": kind})
    err = io.StringIO()
    transport = InProcessTransport(observers_api.handler)
    exit_code = main(["hosts", "list", "--kind", kind], transport=transport, stderr=err)

    # Then the API refuses it (422, like an unknown kind anywhere in a query or body) and the
    # CLI exits 1, each naming the kinds that exist and which of them have hosts
    assert (status, body["error"]) == (422, code)
    assert exit_code == 1
    for message in (body["message"], err.getvalue()):
        assert repr(kind) in message
        assert "pooled-ticker (pooled)" in message and "ticker (dedicated)" in message
    assert f"({code}, HTTP 422)" in err.getvalue()


def test_a_dead_host_past_its_retention_is_not_listed_while_dynamodb_has_yet_to_delete_it(
    hosts: HostStore, clock: ManualClock
) -> None:
    # Given a host that died eight days ago: its TTL passed, DynamoDB deletes such items lazily
    ended = clock() - timedelta(days=8)
    old = hosts.create("pooled-ticker-h9", "pooled-ticker", 3, DEFINITION, ended)
    hosts.mark(old, HostStatus.STOPPED, "drained", now=ended)

    listed = {h["id"] for h in call("/hosts")[1]["hosts"]}

    assert "pooled-ticker-h9" not in listed
    assert {"pooled-ticker-h1", "pooled-ticker-h2"} <= listed  # the live and the recent dead
