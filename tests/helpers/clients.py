"""A boto3 client with some calls replaced (a fault, a race), the rest its own."""

from __future__ import annotations

from typing import Any


class Delegating:
    """Subclass it and define the calls to replace; every other attribute is the client's."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class ItemReads:
    """Items a DynamoDB client read (Scan, Query and BatchGetItem answers) and its Query pages:
    what a pass costs beyond its request count."""

    def __init__(self, client: Any) -> None:
        self.items = 0
        self.queries = 0
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, model: Any, parsed: Any, **_: Any) -> None:
        if model.name == "BatchGetItem":
            self.items += sum(len(v) for v in parsed.get("Responses", {}).values())
        elif model.name in ("Scan", "Query"):
            self.queries += model.name == "Query"
            self.items += len(parsed.get("Items") or [])
