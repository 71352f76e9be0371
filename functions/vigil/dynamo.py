"""The thin layer between plain Python values and DynamoDB's wire format, and its errors.

Adapters call DynamoDB through the low-level client (one request per call, easy to count) and
translate its error codes into these domain exceptions in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, Any]


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
