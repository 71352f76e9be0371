"""Clients for the emulator's own requests (a TTL sweep, Lambda's SQS poller): made from a
session of their own, so they stay out of the account's request counts
(``LocalAccount.requests`` counts what the application and its functions ask)."""

from __future__ import annotations

import weakref
from typing import Any

_OWN: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, Any]]] = weakref.WeakKeyDictionary()
"""Per account session: the emulator's own session beside it, and its clients by service."""


def own_client(session: Any, service: str) -> Any:
    """A ``service`` client with ``session``'s credentials and region but not its event hooks.

    One per service and account session: the testing kit asks for several at each test's start,
    and a new session and client cost more than the requests they make."""
    import boto3

    if session not in _OWN:
        credentials = session.get_credentials()
        own = boto3.session.Session(
            aws_access_key_id=credentials.access_key,
            aws_secret_access_key=credentials.secret_key,
            region_name=session.region_name,
        )
        _OWN[session] = (own, {})
    own, clients = _OWN[session]
    if service not in clients:
        clients[service] = own.client(service)
    return clients[service]
