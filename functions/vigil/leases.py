"""Fenced leases on a DynamoDB item: the one locking primitive Vigil builds on.

A lease is held by writing ``lease_token`` and ``lease_until_ms`` onto an item with a conditional
write that succeeds only when the item's lease is free or expired. Each acquisition also advances the
item's ``fence``, a number that strictly increases, so whoever holds a lease can hand its token to
downstream writes and a stale holder is refused everywhere (Kleppmann's fencing tokens).

Tokens are hybrid-logical: the claimant proposes ``max(now in microseconds, last seen + 1)`` and the
write is conditional on ``fence < token``. Clocks that agree give one request per acquisition; a
claimant whose clock is behind learns the current fence from the failed write (ALL_OLD) and retries
once with ``fence + 1``. Tokens therefore increase strictly whatever the clocks say.

Lease expiry compares the claimant's clock with the recorded ``lease_until_ms``::

    holder:    |--- claim ---- work ---- deadline |-- margin --| lease_until
    claimant:                                       (skew)  ^ sees it expired here at the earliest

A claimant whose clock runs ahead by ``skew`` sees the lease expire ``skew`` early, so a margin larger
than the worst skew keeps a live holder safe. Lambda kills the holder at its deadline, which the
lease already covers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, epoch_ms, from_epoch_ms, iso, system_clock
from vigil.dynamo import Item, Update, any_of, is_condition_failure, old_item, to_wire

MAX_TOKEN_ATTEMPTS = 4


def fence_advances(update: Update, token: int) -> str:
    """The condition that ``token`` is above the item's fence (or the item has none yet)."""
    return any_of(update.absent("fence"), update.lt("fence", token))


def lease_free(update: Update, now: datetime) -> str:
    """The condition that the item's lease, if any, has expired at ``now``."""
    return any_of(update.absent("lease_until_ms"), update.lt("lease_until_ms", epoch_ms(now)))


def next_token(now: datetime, floor: int = 0) -> int:
    """A fencing token above ``floor``, close to the claim time in microseconds for readability."""
    return max(int(now.timestamp() * 1_000_000), floor + 1)


def fence_of(item: Item | None) -> int:
    return int(item.get("fence", 0)) if item else 0


def lease_is_live(item: Item | None, now: datetime) -> bool:
    return bool(item and "lease_until_ms" in item and int(item["lease_until_ms"]) >= epoch_ms(now))


@dataclass(frozen=True)
class Lease:
    key: dict[str, str]
    holder: str
    token: int
    until: datetime


@dataclass(frozen=True)
class LeaseHeld:
    """Who holds a lease that could not be acquired, read from the failed write."""

    holder: str
    until: datetime


class TokenRace(Exception):
    """Tokens kept colliding: another claimant is advancing the same fence right now."""


class LeaseTable:
    """Acquire, renew and release fenced leases on items of one table."""

    def __init__(self, client: Any, table: str, clock: Clock = system_clock) -> None:
        self._client = client
        self._table = table
        self._clock = clock

    def acquire(self, key: dict[str, str], holder: str, duration: timedelta) -> Lease | LeaseHeld:
        floor = 0
        for _ in range(MAX_TOKEN_ATTEMPTS):
            now = self._clock()
            token = next_token(now, floor)
            until = now + duration
            update = Update().set_all(
                {
                    "fence": token,
                    "lease_token": token,
                    "lease_holder": holder,
                    "lease_until_ms": epoch_ms(until),
                    "lease_until": iso(until),
                }
            )
            update.condition(fence_advances(update, token), lease_free(update, now))
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=to_wire(key),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **update.request(),
                )
                return Lease(key=key, holder=holder, token=token, until=until)
            except ClientError as error:
                if not is_condition_failure(error):
                    raise
                old = old_item(error)
                if lease_is_live(old, now):
                    assert old is not None
                    return LeaseHeld(
                        holder=str(old.get("lease_holder", "")),
                        until=from_epoch_ms(int(old["lease_until_ms"])),
                    )
                floor = fence_of(old)
        raise TokenRace(f"could not advance the fence of {key} in {MAX_TOKEN_ATTEMPTS} attempts")

    def renew(self, lease: Lease, duration: timedelta) -> Lease | None:
        """Extend a lease still held under the same token; None if it was lost."""
        until = self._clock() + duration
        update = Update().set_all({"lease_until_ms": epoch_ms(until), "lease_until": iso(until)})
        if not self._while_held(lease, update):
            return None
        return Lease(key=lease.key, holder=lease.holder, token=lease.token, until=until)

    def release(self, lease: Lease) -> bool:
        """Give the lease up early; False if another holder had already taken it over."""
        update = Update().remove("lease_token", "lease_holder", "lease_until_ms", "lease_until")
        return self._while_held(lease, update)

    def _while_held(self, lease: Lease, update: Update) -> bool:
        """Write ``update`` to the lease's item only while ``lease`` still holds it (its token is
        still the item's); False, with nothing written, once another holder has taken it over."""
        update.condition(update.eq("lease_token", lease.token))
        try:
            self._client.update_item(
                TableName=self._table, Key=to_wire(lease.key), **update.request()
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True
