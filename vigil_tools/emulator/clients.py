"""Clients for the emulator's own requests (a TTL sweep, Lambda's SQS poller): made from a
session of their own, so they stay out of the account's request counts
(``LocalAccount.requests`` counts what the application and its functions ask)."""

from __future__ import annotations

from typing import Any


def own_client(session: Any, service: str) -> Any:
    """A ``service`` client with ``session``'s credentials and region but not its event hooks."""
    import boto3

    credentials = session.get_credentials()
    return boto3.session.Session(
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        region_name=session.region_name,
    ).client(service)
