"""The list API's pagination cursor: the last name a page covers, as a fleet index key (the shape
of DynamoDB's LastEvaluatedKey it always had), opaque to callers.

A cursor comes back from the caller, so decoding checks its whole shape: a key of another shape
would fail botocore's validation or DynamoDB's (a 500 for what is only a bad request).
"""

from __future__ import annotations

import base64
import binascii
import json

from vigil.observers.model import FLEET_PARTITION, NAME_PATTERN
from vigil.observers.registry.errors import InvalidCursor


def encode_cursor(name: str) -> str:
    key = {"name": {"S": name}, "fleet": {"S": FLEET_PARTITION}}
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str | None) -> str | None:
    """The name a cursor stands for (the next page starts after it); None for no cursor;
    raises InvalidCursor."""
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, binascii.Error) as error:
        raise InvalidCursor() from error
    if not isinstance(key, dict) or set(key) != {"name", "fleet"}:
        raise InvalidCursor()
    name, fleet = (
        value.get("S") if isinstance(value, dict) and set(value) == {"S"} else None
        for value in (key["name"], key["fleet"])
    )
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or fleet != FLEET_PARTITION:
        raise InvalidCursor()
    return name
