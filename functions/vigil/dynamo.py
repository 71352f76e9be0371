"""The thin layer between plain Python values and DynamoDB's wire format, and its errors.

Adapters call DynamoDB through the low-level client (one request per call, easy to count) and
translate its error codes into these domain exceptions in one place. Their update and condition
expressions are built by :class:`Update`, which names every attribute and value through a generated
placeholder (``#n0``, ``:v0``): a reserved word (``status``, ``name``) is always safe, and no
placeholder is ever sent unused (DynamoDB rejects those).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from vigil.clock import Sleeper

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, Any]
ERROR_TEXT_LIMIT = 1000
"""Longest error text stored on an item (a job's error, a start failure, an exit reason)."""


def to_wire(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(_plain_to_decimal(v)) for k, v in values.items()}


def from_wire(item: Mapping[str, Any] | None) -> Item | None:
    if item is None:
        return None
    return {k: _decimal_to_plain(_deserializer.deserialize(v)) for k, v in item.items()}


def _plain_to_decimal(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _plain_to_decimal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_to_decimal(v) for v in value]
    return value


def _decimal_to_plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _decimal_to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decimal_to_plain(v) for v in value]
    if isinstance(value, set):
        return {_decimal_to_plain(v) for v in value}
    return value


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def is_condition_failure(error: ClientError) -> bool:
    return error_code(error) == "ConditionalCheckFailedException"


def old_item(error: ClientError) -> Item | None:
    """The item a failed conditional write saw (needs ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    return from_wire(error.response.get("Item"))


def cancellation_reasons(error: ClientError) -> list[tuple[str, Item | None]] | None:
    """Per-action (code, old item) of a cancelled transaction, or None if it was not cancelled."""
    if error_code(error) != "TransactionCanceledException":
        return None
    reasons = error.response.get("CancellationReasons") or []
    return [(str(r.get("Code", "None")), from_wire(r.get("Item"))) for r in reasons]


def truncate(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def paginate(call: Callable[..., Any], request: Mapping[str, Any]) -> Iterator[Item]:
    """Every item of a Query or Scan, one request per 1 MB page."""
    page = dict(request)
    while True:
        response = call(**page)
        for raw in response.get("Items") or []:
            yield from_wire(raw) or {}
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        page["ExclusiveStartKey"] = last


def any_of(*conditions: str) -> str:
    return "(" + " OR ".join(conditions) + ")"


def all_of(*conditions: str) -> str:
    return "(" + " AND ".join(conditions) + ")"


_VALUE = re.compile(r":v\d+\b")


class Update:
    """One UpdateItem (or transaction Update): SET, REMOVE and ADD clauses and a condition.

    Clauses are added by attribute name and plain value; :meth:`request` renders the expressions
    and their placeholders. Condition fragments (:meth:`eq`, :meth:`lt`, ...) are strings built on
    the same placeholders, combined with :func:`any_of` / :func:`all_of`, and every
    :meth:`condition` call is ANDed with the previous ones.
    """

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._values: dict[str, Any] = {}
        self._set: dict[str, str] = {}
        self._remove: list[str] = []
        self._remove_paths: list[str] = []
        self._add: list[str] = []
        self._conditions: list[str] = []

    # Operands -----------------------------------------------------------------------------------

    def name(self, attribute: str) -> str:
        if attribute not in self._names:
            self._names[attribute] = f"#n{len(self._names)}"
        return self._names[attribute]

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self._values)}"
        self._values[placeholder] = value
        return placeholder

    # Clauses ------------------------------------------------------------------------------------

    def set(self, attribute: str, value: Any) -> Update:
        self._set[attribute] = f"{self.name(attribute)} = {self.value(value)}"
        return self

    def set_all(self, values: Mapping[str, Any]) -> Update:
        for attribute, value in values.items():
            self.set(attribute, value)
        return self

    def increment(self, attribute: str, by: int = 1) -> Update:
        """``SET a = a + by``: fails on an item without the attribute, as a counter should."""
        name = self.name(attribute)
        self._set[attribute] = f"{name} = {name} + {self.value(by)}"
        return self

    def count_up(self, attribute: str, by: int = 1) -> Update:
        """``SET a = if_not_exists(a, 0) + by``: a counter on an item this update may create."""
        name = self.name(attribute)
        self._set[attribute] = f"{name} = if_not_exists({name}, {self.value(0)}) + {self.value(by)}"
        return self

    def set_from(self, attribute: str, source: str) -> Update:
        """``SET a = source``: another attribute's value, as the item holds it when written."""
        self._set[attribute] = f"{self.name(attribute)} = {self.name(source)}"
        return self

    def set_default(self, attribute: str, value: Any) -> Update:
        """``SET a = if_not_exists(a, value)``: keeps what is there."""
        name = self.name(attribute)
        self._set[attribute] = f"{name} = if_not_exists({name}, {self.value(value)})"
        return self

    def remove(self, *attributes: str) -> Update:
        """Remove attributes; one this update also sets is set, not removed (the two conflict)."""
        for attribute in attributes:
            if attribute not in self._remove:
                self.name(attribute)
                self._remove.append(attribute)
        return self

    def set_in(self, attribute: str, key: str, value: Any) -> Update:
        """``SET a.key = value``: one entry of a map attribute (the map must exist)."""
        self._set[f"{attribute}.{key}"] = f"{self.path(attribute, key)} = {self.value(value)}"
        return self

    def remove_in(self, attribute: str, key: str) -> Update:
        """``REMOVE a.key``: one entry of a map attribute."""
        rendered = self.path(attribute, key)
        if rendered not in self._remove_paths:
            self._remove_paths.append(rendered)
        return self

    def add(self, attribute: str, value: Any) -> Update:
        self._add.append(f"{self.name(attribute)} {self.value(value)}")
        return self

    def condition(self, *conditions: str) -> Update:
        self._conditions += conditions
        return self

    # Condition fragments ------------------------------------------------------------------------

    def path(self, *attributes: str) -> str:
        """A document path (``#n0.#n1``): each step through its own name placeholder."""
        return ".".join(self.name(a) for a in attributes)

    def eq(self, attribute: str, value: Any) -> str:
        return f"{self.name(attribute)} = {self.value(value)}"

    def ne(self, attribute: str, value: Any) -> str:
        return f"{self.name(attribute)} <> {self.value(value)}"

    def eq_in(self, attribute: str, key: str, value: Any) -> str:
        return f"{self.path(attribute, key)} = {self.value(value)}"

    def size_lt(self, attribute: str, value: Any) -> str:
        return f"size({self.name(attribute)}) < {self.value(value)}"

    def lt(self, attribute: str, value: Any) -> str:
        return f"{self.name(attribute)} < {self.value(value)}"

    def le(self, attribute: str, value: Any) -> str:
        return f"{self.name(attribute)} <= {self.value(value)}"

    def one_of(self, attribute: str, *values: Any) -> str:
        return f"{self.name(attribute)} IN ({', '.join(self.value(v) for v in values)})"

    def lacks(self, attribute: str, element: Any) -> str:
        """The attribute (a set or list) is absent or does not hold ``element``."""
        name = self.name(attribute)
        return f"(attribute_not_exists({name}) OR NOT contains({name}, {self.value(element)}))"

    def exists(self, attribute: str) -> str:
        return f"attribute_exists({self.name(attribute)})"

    def absent(self, attribute: str) -> str:
        return f"attribute_not_exists({self.name(attribute)})"

    # Rendering ----------------------------------------------------------------------------------

    def request(self) -> dict[str, Any]:
        """``UpdateExpression``, ``ConditionExpression`` (if any) and both placeholder maps."""
        clauses = []
        if self._set:
            clauses.append("SET " + ", ".join(self._set.values()))
        removes = [self.name(a) for a in self._remove if a not in self._set]
        removes += self._remove_paths
        if removes:
            clauses.append("REMOVE " + ", ".join(removes))
        if self._add:
            clauses.append("ADD " + ", ".join(self._add))
        request: dict[str, Any] = {
            "UpdateExpression": " ".join(clauses),
            "ExpressionAttributeNames": {p: a for a, p in self._names.items()},
        }
        if self._conditions:
            request["ConditionExpression"] = " AND ".join(self._conditions)
        # A clause replaced by a later one (an attribute set twice) leaves its value behind:
        # DynamoDB refuses a placeholder no expression uses, so send only the used ones.
        used = set(
            _VALUE.findall(
                f"{request['UpdateExpression']} {request.get('ConditionExpression', '')}"
            )
        )
        values = {p: v for p, v in self._values.items() if p in used}
        if values:
            request["ExpressionAttributeValues"] = to_wire(values)
        return request


BATCH_GET_ATTEMPTS = 6


class IncompleteBatch(Exception):
    """BatchGetItem kept leaving keys unprocessed (throttling): the caller should retry later."""


def batch_get(
    client: Any,
    table: str,
    keys: list[Mapping[str, Any]],
    attributes: Sequence[str] | None,
    *,
    sleep: Sleeper,
    attempts: int = BATCH_GET_ATTEMPTS,
    consistent: bool = False,
) -> list[Item]:
    """The items of up to 100 keys (only ``attributes``; None: whole items), in no particular
    order; ``consistent``: strongly consistent reads (twice the read units).

    DynamoDB may leave keys unprocessed when it throttles, and asks callers to back off before
    asking for them again: the pause goes through ``sleep``, so tests see it without waiting.
    """
    found: list[Item] = []
    pending = [to_wire(k) for k in keys]
    placeholders = {f"#p{i}": a for i, a in enumerate(attributes or ())}
    shape: dict[str, Any] = {"ConsistentRead": True} if consistent else {}
    if placeholders:
        shape |= {
            "ProjectionExpression": ", ".join(placeholders),
            "ExpressionAttributeNames": placeholders,
        }
    for attempt in range(attempts):
        answer = client.batch_get_item(RequestItems={table: {"Keys": pending, **shape}})
        found += [from_wire(raw) or {} for raw in answer.get("Responses", {}).get(table, [])]
        pending = answer.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        if not pending:
            return found
        if attempt + 1 < attempts:
            sleep(min(0.05 * 2**attempt, 1.0))
    raise IncompleteBatch(f"BatchGetItem left {len(pending)} keys unprocessed; retry")
