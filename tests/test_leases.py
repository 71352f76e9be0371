"""A lease is renewed or released only while its holder still holds it: once another holder has
taken the item over (the first lease expired), the stale holder's renew and release write nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tables import create_pk_sk_table
from vigil.clock import ManualClock, epoch_ms
from vigil.leases import Lease, LeaseTable

KEY = {"pk": "lease", "sk": "resync"}
MINUTE = timedelta(minutes=1)


@pytest.fixture
def leases(dynamodb: Any, clock: ManualClock) -> LeaseTable:
    return LeaseTable(dynamodb, create_pk_sk_table(dynamodb, "leases"), clock)


def item(dynamodb: Any) -> dict[str, Any]:
    return dict(
        dynamodb.get_item(TableName="leases", Key={k: {"S": v} for k, v in KEY.items()})["Item"]
    )


def test_a_held_lease_is_renewed_then_released(
    leases: LeaseTable, dynamodb: Any, clock: ManualClock
) -> None:
    lease = leases.acquire(KEY, "a", MINUTE)
    assert isinstance(lease, Lease)
    clock.advance(30)

    renewed = leases.renew(lease, MINUTE)

    assert renewed == Lease(KEY, "a", lease.token, clock() + MINUTE)
    assert item(dynamodb)["lease_until_ms"] == {"N": str(epoch_ms(clock() + MINUTE))}
    assert leases.release(lease) is True
    assert "lease_token" not in item(dynamodb) and "lease_holder" not in item(dynamodb)


def test_a_lease_taken_over_is_neither_renewed_nor_released_by_its_old_holder(
    leases: LeaseTable, dynamodb: Any, clock: ManualClock
) -> None:
    stale = leases.acquire(KEY, "a", MINUTE)
    clock.advance(61)
    taker = leases.acquire(KEY, "b", MINUTE)
    assert isinstance(stale, Lease) and isinstance(taker, Lease)
    before = item(dynamodb)

    assert leases.renew(stale, MINUTE) is None
    assert leases.release(stale) is False
    assert item(dynamodb) == before
