"""``run.fenced.table(name)``: DynamoDB writes that a superseded run cannot make.

Each write carries, ANDed with the author's own condition, the condition that the item's
:data:`~vigil.contract.effects.FENCE_ATTRIBUTE` is absent, belongs to another scope, or is this
run's fence or an older one; and it writes this run's fence. One request per write, as without
fences: the condition rides on the write. When the write is refused, the item it read
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``, free) tells the two conditions apart: a newer fence
raises :class:`Fenced`, anything else is the author's condition and its error is re-raised as is.

A deletion leaves no fence behind, so a superseded run could create the item again afterwards:
where that matters, write a tombstone (``update_item`` setting a ``deleted`` flag) instead.

So a plain write is refused once a newer run wrote *that item*, not before: a superseded run
whose successor has not touched the item still writes it. A strict write (``run.fenced.strict``)
also checks the run's own claim in the same request (:mod:`vigil.effects.claim`).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from botocore.exceptions import ClientError

from vigil.contract.effects import FENCE_ATTRIBUTE
from vigil.dynamo import Item, cancellation_reasons, is_condition_failure, old_item
from vigil.effects.claim import Claim
from vigil.effects.fence import RunFence, refused
from vigil.fenced_write import Halt
from vigil.persist import persist

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
    without ``TableName``, in its wire format). With a ``claim`` (``run.fenced.strict``), each
    write also checks the run's claim, in the same request (:mod:`vigil.effects.claim`)."""

    def __init__(
        self, client: Any, table: str, fence: RunFence, halt: Halt, claim: Claim | None = None
    ) -> None:
        self._client = client
        self.table = table
        self._fence = fence
        self._halt = halt
        self._claim = claim

    def put_item(self, **request: Any) -> dict[str, Any]:
        item = dict(request.pop("Item"))
        item[FENCE_ATTRIBUTE] = {"S": self._fence.value}
        return self._write("Put", {**request, "Item": item}, "put_item")

    def update_item(self, **request: Any) -> dict[str, Any]:
        if "UpdateExpression" not in request:
            raise ValueError("fenced update_item needs an UpdateExpression (not AttributeUpdates)")
        request["UpdateExpression"] = with_fence_set(request["UpdateExpression"])
        return self._write("Update", request, request.get("Key"))

    def delete_item(self, **request: Any) -> dict[str, Any]:
        return self._write("Delete", request, request.get("Key"))

    def _write(self, kind: str, request: dict[str, Any], what: Any) -> dict[str, Any]:
        """``kind``: Put, Update or Delete; ``what``: the key written, for the error (a put
        names no key apart from its item)."""
        self._halt.refuse_if_cancelled()
        if self._claim is not None:
            return self._transact(kind, request, what)
        merged = merge_condition(request, self._fence)
        call = getattr(self._client, f"{kind.lower()}_item")
        try:
            return dict(call(TableName=self.table, **merged))
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            self._refuse_if_newer(old_item(error), what)
            raise

    def _transact(self, kind: str, request: dict[str, Any], what: Any) -> dict[str, Any]:
        """The write and the claim's ``ConditionCheck`` in one transaction, retried through
        transient faults (a conflict, a throttle) under one ``ClientRequestToken``, so a retry
        of a transaction that was applied unanswered is answered as applied."""
        assert self._claim is not None
        extra = sorted(set(request) - TRANSACTION_TAKES)
        if extra:
            raise ValueError(
                f"a strict write is a transaction, which takes none of {extra} (it returns no "
                "item and no capacity): leave them out, or write through the plain writer"
            )
        action = {"TableName": self.table, **merge_condition(request, self._fence)}
        items = [{kind: action}, self._claim.condition_check()]
        token = str(uuid.uuid4())

        def once() -> ClientError | None:
            try:
                self._client.transact_write_items(TransactItems=items, ClientRequestToken=token)
            except ClientError as error:
                reasons = cancellation_reasons(error) or []
                if any(code == REFUSED for code, _ in reasons):
                    return error  # a condition refused it: final
                raise
            return None

        site = self._claim.site
        refusal = persist(once, time_left_s=site.time_left_s, sleep=site.sleep)
        if refusal is None:
            return {}
        (_, write_seen), (claim_code, claim_seen) = cancellation_reasons(refusal) or []
        if claim_code == REFUSED:
            raise self._claim.refused(claim_seen) from None
        self._refuse_if_newer(write_seen, what)
        raw = (refusal.response.get("CancellationReasons") or [{}])[0]
        answer = {
            "Error": {"Code": "ConditionalCheckFailedException", "Message": raw.get("Message", "")},
            **({"Item": raw["Item"]} if "Item" in raw else {}),
        }
        failed = self._client.exceptions.ConditionalCheckFailedException
        raise failed(answer, f"{kind}Item") from None

    def _refuse_if_newer(self, seen: Item | None, what: Any) -> None:
        """``Fenced`` if the item a refused write saw was last written by a newer run of this
        scope; else nothing (the author's own condition refused it)."""
        found = (seen or {}).get(FENCE_ATTRIBUTE)
        if self._fence.superseded_by(found):
            raise refused(self._halt, f"table {self.table} {what}", self._fence, found) from None


TRANSACTION_TAKES = frozenset(
    {
        "Key",
        "Item",
        "UpdateExpression",
        "ConditionExpression",
        "ExpressionAttributeNames",
        "ExpressionAttributeValues",
        "ReturnValuesOnConditionCheckFailure",
    }
)
"""What a write inside a transaction takes (beside ``TableName``)."""
REFUSED = "ConditionalCheckFailed"


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
