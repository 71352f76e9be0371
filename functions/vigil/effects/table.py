"""``run.fenced.table(name)``: DynamoDB writes that a superseded run cannot make.

Each write carries, ANDed with the author's own condition, the condition that the item's
:data:`~vigil.contract.effects.FENCE_ATTRIBUTE` is absent, belongs to another scope, or is this
run's fence or an older one; and it writes this run's fence. One request per write, as without
fences: the condition rides on the write. When the write is refused, the item it read
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``, free) tells the two conditions apart: a newer fence
raises :class:`Fenced`, anything else is the author's condition and its error is re-raised as is.

A deletion leaves no fence behind, so a superseded run could create the item again afterwards:
where that matters, write a tombstone (``update_item`` setting a ``deleted`` flag) instead.
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

from vigil.contract.effects import FENCE_ATTRIBUTE
from vigil.dynamo import is_condition_failure, old_item
from vigil.effects.fence import RunFence, refused
from vigil.fenced_write import Halt

NAME = "#vigil_fence"
VALUE = ":vigil_fence"
PREFIX = ":vigil_fence_scope"
SIZE = ":vigil_fence_size"
OURS = (NAME, VALUE, PREFIX, SIZE)
SET_CLAUSE = re.compile(r"(?<![#:\w])SET\b", re.IGNORECASE)


def fence_condition() -> str:
    """Absent, another scope's, or not newer than this run's (string order is number order)."""
    return (
        f"attribute_not_exists({NAME}) OR NOT (begins_with({NAME}, {PREFIX}) AND size({NAME}) = "
        f"{SIZE}) OR {NAME} <= {VALUE}"
    )


class FencedTable:
    """The write half of a DynamoDB client for one granted table (the client's own arguments,
    without ``TableName``, in its wire format)."""

    def __init__(self, client: Any, table: str, fence: RunFence, halt: Halt) -> None:
        self._client = client
        self.table = table
        self._fence = fence
        self._halt = halt

    def put_item(self, **request: Any) -> dict[str, Any]:
        item = dict(request.pop("Item"))
        item[FENCE_ATTRIBUTE] = {"S": self._fence.value}
        return self._write(self._client.put_item, {**request, "Item": item}, "put_item")

    def update_item(self, **request: Any) -> dict[str, Any]:
        if "UpdateExpression" not in request:
            raise ValueError("fenced update_item needs an UpdateExpression (not AttributeUpdates)")
        request["UpdateExpression"] = with_fence_set(request["UpdateExpression"])
        return self._write(self._client.update_item, request, request.get("Key"))

    def delete_item(self, **request: Any) -> dict[str, Any]:
        return self._write(self._client.delete_item, request, request.get("Key"))

    def _write(self, call: Any, request: dict[str, Any], what: Any) -> dict[str, Any]:
        """``what``: the key written, for the error (a put names no key apart from its item)."""
        merged = merge_condition(request, self._fence)
        try:
            return dict(call(TableName=self.table, **merged))
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            found = (old_item(error) or {}).get(FENCE_ATTRIBUTE)
            if self._fence.superseded_by(found):
                raise refused(
                    self._halt, f"table {self.table} {what}", self._fence, found
                ) from None
            raise


def with_fence_set(expression: str) -> str:
    """The author's update expression, also setting the fence (in its SET clause, or a new one)."""
    if SET_CLAUSE.search(expression):
        return SET_CLAUSE.sub(f"SET {NAME} = {VALUE},", expression, count=1)
    return f"SET {NAME} = {VALUE} {expression}"


def merge_condition(request: dict[str, Any], fence: RunFence) -> dict[str, Any]:
    """The request with the fence's condition ANDed to the author's, placeholders merged; a clash
    with the fence's own placeholders is refused before any request."""
    names = dict(request.get("ExpressionAttributeNames") or {})
    values = dict(request.get("ExpressionAttributeValues") or {})
    clash = sorted(set(OURS) & (set(names) | set(values)))
    if clash:
        raise ValueError(f"placeholders {clash} are reserved for the fence: rename them")
    if "Expected" in request:
        raise ValueError("fenced writes take ConditionExpression, not the legacy Expected")
    names[NAME] = FENCE_ATTRIBUTE
    values[VALUE] = {"S": fence.value}
    values[PREFIX] = {"S": fence.prefix}
    values[SIZE] = {"N": str(len(fence.value))}
    author = request.get("ConditionExpression")
    condition = fence_condition() if not author else f"({author}) AND ({fence_condition()})"
    merged = {
        **request,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return merged
