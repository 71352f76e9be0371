"""Time to live on the local tables: items past their expiry leave, as DynamoDB's TTL removes them.

moto stores a table's TTL setting but never expires anything (NOTES.md), so a local stack that runs
all day would keep every tick record and stopped observer for ever. :class:`TtlSweep` does what
AWS does, driven by the emulator's clock (simulated in ``vigil local up`` and the testing kit):
for each table whose TTL is enabled, an item whose TTL attribute is a number of epoch seconds
earlier than now is deleted. As on AWS, an attribute that is not a number, or a time more than
five years in the past, is left alone. Each delete is conditional on the item's expiry being the
one seen, so an item renewed meanwhile stays. On AWS deletion happens within days, usually minutes;
here within ``every`` of simulated time. The deletion reaches the table's stream as a ``REMOVE``
(without AWS's ``userIdentity`` of the TTL service).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from vigil_tools.emulator.clients import own_client

OLDEST = timedelta(days=5 * 365)
"""AWS does not delete items whose expiry is more than five years in the past."""


class TtlSweep:
    def __init__(self, client: Any, *, every: timedelta = timedelta(minutes=1)) -> None:
        self._client = client
        self._every = every
        self._last: datetime | None = None

    @classmethod
    def of(cls, session: Any, *, every: timedelta = timedelta(minutes=1)) -> TtlSweep:
        """A sweep with a client of its own: its requests are the emulator's, not the app's, so
        they stay out of the account's request counts."""
        return cls(own_client(session, "dynamodb"), every=every)

    def due(self, now: datetime) -> int:
        """Sweep if ``every`` has passed on the clock since the last sweep; items deleted."""
        if self._last is not None and now - self._last < self._every:
            return 0
        return self.sweep(now)

    def sweep(self, now: datetime) -> int:
        self._last = now
        deleted = 0
        for table, attribute in self._tables_with_ttl():
            deleted += self._sweep_table(table, attribute, now)
        return deleted

    def _tables_with_ttl(self) -> Iterator[tuple[str, str]]:
        kwargs: dict[str, Any] = {}
        while True:
            page = self._client.list_tables(**kwargs)
            for name in page.get("TableNames", []):
                ttl = self._client.describe_time_to_live(TableName=name)
                description = ttl.get("TimeToLiveDescription", {})
                if description.get("TimeToLiveStatus") == "ENABLED":
                    yield name, description["AttributeName"]
            if "LastEvaluatedTableName" not in page:
                return
            kwargs["ExclusiveStartTableName"] = page["LastEvaluatedTableName"]

    def _sweep_table(self, table: str, attribute: str, now: datetime) -> int:
        """Scans keys and expiry only, decides here (moto's filter comparisons fail on an
        attribute of another type), deletes on the condition that the item is still expired."""
        key_names = [
            k["AttributeName"]
            for k in self._client.describe_table(TableName=table)["Table"]["KeySchema"]
        ]
        now_s, oldest_s = now.timestamp(), (now - OLDEST).timestamp()
        names = {f"#a{i}": name for i, name in enumerate([attribute, *key_names])}
        kwargs: dict[str, Any] = {
            "TableName": table,
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
        }
        deleted = 0
        while True:
            page = self._client.scan(**kwargs)
            for item in page.get("Items", []):
                expiry = item.get(attribute, {}).get("N")
                if expiry is None or not oldest_s <= float(expiry) < now_s:
                    continue
                try:
                    self._client.delete_item(
                        TableName=table,
                        Key={name: item[name] for name in key_names},
                        ConditionExpression="#ttl = :seen",
                        ExpressionAttributeNames={"#ttl": attribute},
                        ExpressionAttributeValues={":seen": {"N": expiry}},
                    )
                    deleted += 1
                except self._client.exceptions.ConditionalCheckFailedException:
                    pass  # renewed meanwhile: it stays
            if "LastEvaluatedKey" not in page:
                return deleted
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
