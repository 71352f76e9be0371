"""The update-expression builder, the truncation of error text and the batch-get retry."""

from __future__ import annotations

import re
from typing import Any

import pytest

from vigil.dynamo import (
    IncompleteBatch,
    Update,
    all_of,
    any_of,
    batch_get,
    from_wire,
    truncate,
)


def test_every_attribute_and_value_goes_through_a_generated_placeholder() -> None:
    update = Update().set("status", "RUNNING").set("name", "x").increment("version")
    update.remove("detail", "status").add("active", 1)
    update.condition(update.eq("version", 3), any_of(update.absent("lease"), update.lt("n", 5)))

    request = update.request()

    assert request["UpdateExpression"] == (
        "SET #n0 = :v0, #n1 = :v1, #n2 = #n2 + :v2 REMOVE #n3 ADD #n4 :v3"
    )
    assert (
        request["ConditionExpression"] == "#n2 = :v4 AND (attribute_not_exists(#n5) OR #n6 < :v5)"
    )
    assert request["ExpressionAttributeNames"] == {
        "#n0": "status",
        "#n1": "name",
        "#n2": "version",
        "#n3": "detail",
        "#n4": "active",
        "#n5": "lease",
        "#n6": "n",
    }
    assert from_wire(request["ExpressionAttributeValues"]) == {
        ":v0": "RUNNING",
        ":v1": "x",
        ":v2": 1,
        ":v3": 1,
        ":v4": 3,
        ":v5": 5,
    }


def test_an_attribute_set_is_not_also_removed_and_no_condition_means_none_sent() -> None:
    request = Update().remove("a").set("a", 1).set_default("b", 0).request()
    assert request["UpdateExpression"] == "SET #n0 = :v0, #n1 = if_not_exists(#n1, :v1)"
    assert "ConditionExpression" not in request


def test_a_remove_only_update_sends_no_values() -> None:
    request = Update().remove("x").request()
    assert request == {"UpdateExpression": "REMOVE #n0", "ExpressionAttributeNames": {"#n0": "x"}}


def test_conditions_combine_with_parentheses() -> None:
    assert all_of("a", any_of("b", "c")) == "(a AND (b OR c))"


def test_error_text_is_cut_to_the_limit_with_a_mark() -> None:
    assert truncate("short") == "short"
    cut = truncate("x" * 1500)
    assert len(cut) == 1000 and cut.endswith("…")
    assert truncate("abcdef", limit=4) == "abc…"


class Throttled:
    """A client whose BatchGetItem leaves every key but the first unprocessed, ``times`` times."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        keys = RequestItems["t"]["Keys"]
        if self.calls <= self.times:
            served, left = keys[:1], keys[1:]
        else:
            served, left = keys, []
        answer: dict[str, Any] = {"Responses": {"t": served}}
        if left:
            answer["UnprocessedKeys"] = {"t": {"Keys": left}}
        return answer


def test_unprocessed_keys_are_asked_again_after_an_injected_pause() -> None:
    client = Throttled(times=2)
    pauses: list[float] = []
    keys = [{"name": n} for n in ("a", "b", "c", "d")]

    items = batch_get(client, "t", keys, ["name"], sleep=pauses.append)

    assert sorted(i["name"] for i in items) == ["a", "b", "c", "d"]
    assert client.calls == 3 and pauses == [0.05, 0.1]


def test_a_batch_still_unprocessed_after_the_last_attempt_is_an_error() -> None:
    pauses: list[float] = []
    keys = [{"name": n} for n in ("a", "b", "c")]
    with pytest.raises(IncompleteBatch, match="1 keys unprocessed"):
        batch_get(Throttled(times=99), "t", keys, ["name"], sleep=pauses.append, attempts=2)
    assert pauses == [0.05]


def test_setting_an_attribute_twice_sends_no_unused_value() -> None:
    """Found in review: the first value stayed in the request and DynamoDB refuses unused ones."""
    request = Update().set("status", "RUNNING").set("status", "FAILED").request()
    text = request["UpdateExpression"] + " " + request.get("ConditionExpression", "")
    assert set(request["ExpressionAttributeValues"]) == set(re.findall(r":v\d+", text))
    assert request["ExpressionAttributeValues"] == {":v1": {"S": "FAILED"}}
