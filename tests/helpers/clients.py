"""A boto3 client with some calls replaced (a fault, a race), the rest its own."""

from __future__ import annotations

from typing import Any


class Delegating:
    """Subclass it and define the calls to replace; every other attribute is the client's."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
