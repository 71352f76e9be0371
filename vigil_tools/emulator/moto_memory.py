"""Narrow workarounds that keep moto (5.2.1) flat in memory and each DynamoDB write O(item).

Left as it is, moto cannot run all day (``vigil local up``, the testing kit, a long soak):

* **The instance tracker.** ``moto.core.common_models.BaseModel.__new__`` appends every model
  instance it creates (each DynamoDB ``Item``, every ``StreamRecord``, every table copy, SQS
  messages, ECS tasks...) to its class's ``instances_tracked`` list, which only
  ``reset_model_data`` clears. Only moto's dashboard (``/moto-api/data.json``) and S3's reset
  (which closes its keys' buffers) read those lists. :func:`install` keeps tracking S3's models
  and stops tracking every other service's: the dashboard then lists no instances of those.
* **The rollback copy.** ``DynamoDBBackend.transact_write_items`` deep-copies every table a
  transaction names before it starts, to swap the copies back in if the transaction is
  cancelled: each transaction costs O(table) in time and garbage, and a cancelled one replaces
  the table object (a stream iterator opened on it goes stale). :func:`install` makes that copy
  hand back the table itself and instead saves, before the transaction, a copy of only the items
  it names (and each touched table's stream length); a transaction that raises gets exactly
  those items (and the stream) put back, in place. A cancelled transaction still changes
  nothing, as on AWS.

* **The stream's records and iterators.** A table's ``StreamShard.items`` keeps every stream
  record for ever (AWS keeps 24 hours), about 3 KB a write; ``DynamoDBStreamsBackend
  .shard_iterators`` keeps every shard iterator it hands out (AWS's expire after 15 minutes),
  about 1.6 KB each, and a poll takes at least two. :class:`StreamTrim` (run by ``vigil local
  up``'s loop, on the emulator's clock) drops the records older than 24 hours, and the records
  the in-process stream poller (:class:`~vigil_tools.emulator.streams.StreamMapping`) has passed,
  and the iterators older than 15 minutes. A stream's sequence numbers stay as they were: moto
  indexes a shard's list by ``sequence number - starting_sequence_number``, so the trim deletes
  the front of the list and moves the starting number by as many. (A reader outside the poller,
  e.g. ``aws dynamodbstreams get-records`` at the local endpoint, may find records its reading
  from TRIM_HORIZON would have had on AWS already gone: no TrimmedDataAccessException, they
  are just not there.)

All rely on moto's internals, so ``tests/local/test_moto_memory.py`` checks the attributes and
behaviour relied on, and fails the day a moto upgrade changes them (then re-read moto's code and
adapt this module, or drop it if moto fixed the leak). ``VIGIL_MOTO_AS_IS=1`` leaves moto as it is
(to measure the difference, or to rule this module out).
"""

from __future__ import annotations

import copy
import os
import types
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

KEEP_TRACKING = frozenset({"s3"})
"""Services whose own code reads ``instances_tracked`` (S3's reset closes its keys' buffers)."""
AS_IS = "VIGIL_MOTO_AS_IS"

_originals: dict[str, Any] = {}


def install() -> bool:
    """Apply both workarounds (once; idempotent). False when ``VIGIL_MOTO_AS_IS`` says not to."""
    if os.environ.get(AS_IS, "") not in ("", "0"):
        return False
    if _originals:
        return True
    from moto.core import model_instances
    from moto.core.common_models import BaseModel
    from moto.dynamodb import models as dynamodb_models
    from moto.dynamodb.models.table import Table

    _originals["new"] = BaseModel.__dict__["__new__"]
    _originals["copy"] = getattr(dynamodb_models, "copy")  # noqa: B009 (not exported)
    _originals["transact"] = dynamodb_models.DynamoDBBackend.transact_write_items
    BaseModel.__new__ = staticmethod(_untracked_new)  # type: ignore[assignment]
    for service, models in model_instances.model_data.items():
        if service not in KEEP_TRACKING:
            for model in models.values():
                model.instances_tracked = []  # type: ignore[attr-defined]
    setattr(dynamodb_models, "copy", _copy_sharing_tables(Table))  # noqa: B010
    dynamodb_models.DynamoDBBackend.transact_write_items = _transact_restoring_items(  # type: ignore[method-assign]
        _originals["transact"]
    )
    return True


def uninstall() -> None:
    """Put moto back as it was (tests of this module)."""
    if not _originals:
        return
    from moto.core.common_models import BaseModel
    from moto.dynamodb import models as dynamodb_models

    BaseModel.__new__ = _originals.pop("new")  # type: ignore[method-assign]
    setattr(dynamodb_models, "copy", _originals.pop("copy"))  # noqa: B010
    dynamodb_models.DynamoDBBackend.transact_write_items = _originals.pop("transact")  # type: ignore[method-assign]


def installed() -> bool:
    return bool(_originals)


def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``BaseModel.__new__`` without the registration, but for :data:`KEEP_TRACKING`."""
    from moto.core.common_models import BaseModel

    instance = super(BaseModel, cls).__new__(cls)  # type: ignore[misc]
    if cls.__module__.split(".")[1] in KEEP_TRACKING:
        cls.instances_tracked.append(instance)  # type: ignore[attr-defined]
    return instance


def _copy_sharing_tables(table_type: type) -> types.ModuleType:
    """The ``copy`` module as moto's DynamoDB backend sees it: a deep copy of a table is the
    table itself (the rollback copy, the only one it makes); anything else is copied as usual."""
    shim = types.ModuleType("copy", "copy, sharing DynamoDB tables (vigil_tools moto_memory)")
    shim.__dict__.update(copy.__dict__)

    def deepcopy(value: Any, memo: dict[int, Any] | None = None, _nil: Any = None) -> Any:
        if isinstance(value, table_type):
            return value
        return copy.deepcopy(value, memo)

    shim.deepcopy = deepcopy  # type: ignore[attr-defined]
    return shim


@dataclass
class _Saved:
    table: Any
    hash_key: Any
    range_key: Any
    item: Any
    """A deep copy of the item before the transaction, or None if it did not exist."""
    hash_was_there: bool


def _transact_restoring_items(original: Callable[..., None]) -> Callable[..., None]:
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved, streams = _save(self, transact_items)
        try:
            original(self, transact_items)
        except Exception:
            _restore(saved, streams)
            raise

    transact_write_items.__doc__ = original.__doc__
    transact_write_items.__wrapped__ = original  # type: ignore[attr-defined]
    return transact_write_items


def _save(
    backend: Any, transact_items: list[dict[str, Any]]
) -> tuple[list[_Saved], list[tuple[list[Any], int]]]:
    saved: dict[tuple[str, Any, Any], _Saved] = {}
    streams: dict[str, tuple[list[Any], int]] = {}
    for entry in transact_items:
        for _, op in entry.items():
            table = backend.tables.get(op.get("TableName"))
            if table is None:
                continue
            try:
                key = op["Key"] if "Key" in op else _key_of(table, op["Item"])
                hash_key, range_key = backend.get_keys_value(table, key)
                there = hash_key in table.items  # before get_item: a defaultdict adds the key
                current = table.get_item(hash_key, range_key)
            except Exception:  # a malformed key: moto refuses it before writing that item
                continue
            saved.setdefault(
                (table.name, hash_key, range_key),
                _Saved(table, hash_key, range_key, copy.deepcopy(current), there),
            )
            if table.stream_shard is not None and table.name not in streams:
                streams[table.name] = (table.stream_shard.items, len(table.stream_shard.items))
    return list(saved.values()), list(streams.values())


def _key_of(table: Any, attributes: dict[str, Any]) -> dict[str, Any]:
    key = {table.hash_key_attr: attributes[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attributes[table.range_key_attr]
    return key


def _restore(saved: list[_Saved], streams: list[tuple[list[Any], int]]) -> None:
    for entry in saved:
        items = entry.table.items
        if entry.range_key is not None:
            if entry.item is None:
                items.get(entry.hash_key, {}).pop(entry.range_key, None)
                if not entry.hash_was_there and not items.get(entry.hash_key, True):
                    items.pop(entry.hash_key, None)
            else:
                items[entry.hash_key][entry.range_key] = entry.item
        elif entry.item is None:
            items.pop(entry.hash_key, None)
        else:
            items[entry.hash_key] = entry.item
    for records, length in streams:
        del records[length:]


RECORDS_KEPT = timedelta(hours=24)
"""AWS keeps a stream's records 24 hours."""
ITERATORS_KEPT = timedelta(minutes=15)
"""AWS's shard iterators expire 15 minutes after they are handed out."""


@dataclass
class StreamTrim:
    """Drops the stream records and shard iterators of one account and region that AWS would no
    longer hold, or that no reader here needs any more (see the module's docstring).

    Ages are told by checkpoints on the caller's clock: at each trim, each shard's next sequence
    number and the count of iterators handed out so far are noted; what was there at a checkpoint
    at least ``RECORDS_KEPT``/``ITERATORS_KEPT`` old is older than that. Not thread-safe against
    moto's own requests: the caller holds whatever serializes them (the local endpoint's lock).
    """

    account: str
    region: str
    every: timedelta = timedelta(minutes=1)
    _last: datetime | None = None
    _records: dict[str, deque[tuple[datetime, int]]] = field(default_factory=dict)
    _iterators: deque[tuple[datetime, int]] = field(default_factory=deque)
    _iterators_dropped: int = 0

    @classmethod
    def of(cls, session: Any, *, every: timedelta = timedelta(minutes=1)) -> StreamTrim:
        account = session.client("sts").get_caller_identity()["Account"]
        return cls(account, session.region_name, every)

    def due(self, now: datetime, passed: Mapping[str, int | None]) -> int:
        """Trim if ``every`` has passed on the clock since the last trim; records dropped."""
        if self._last is not None and now - self._last < self.every:
            return 0
        return self.trim(now, passed)

    def trim(self, now: datetime, passed: Mapping[str, int | None]) -> int:
        """``passed``: per table name, the last sequence number every reader has read (None:
        nothing yet); the records of a table not named there leave at 24 hours only. Nothing
        when moto is left as it is (``VIGIL_MOTO_AS_IS``)."""
        if not installed():
            return 0
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodbstreams.models import dynamodbstreams_backends

        self._last = now
        dropped = 0
        for name, table in dynamodb_backends[self.account][self.region].tables.items():
            shard = table.stream_shard
            if shard is None:
                continue
            checkpoints = self._records.setdefault(name, deque())
            checkpoints.append((now, shard.starting_sequence_number + len(shard.items)))
            aged = _through(checkpoints, now - RECORDS_KEPT)  # the next number then: before it
            through = aged - 1 if aged is not None else None
            reader = passed.get(name)
            if reader is not None:
                through = reader if through is None else max(through, reader)
            if through is not None:
                dropped += trim_shard(shard, through)
        iterators = dynamodbstreams_backends[self.account][self.region].shard_iterators
        self._iterators.append((now, self._iterators_dropped + len(iterators)))
        handed = _through(self._iterators, now - ITERATORS_KEPT)
        if handed is not None:
            for key in list(iterators)[: handed - self._iterators_dropped]:
                del iterators[key]  # a dict keeps its order: the first keys are the oldest
            self._iterators_dropped = max(self._iterators_dropped, handed)
        return dropped


def _through(checkpoints: deque[tuple[datetime, int]], before: datetime) -> int | None:
    """The count noted at the latest checkpoint no later than ``before`` (older ones leave)."""
    found = None
    while checkpoints and checkpoints[0][0] <= before:
        found = checkpoints.popleft()[1]
    if found is not None:
        checkpoints.appendleft((before, found))  # still the answer until a later one ages
    return found


def trim_shard(shard: Any, through: int) -> int:
    """Drop a moto ``StreamShard``'s records up to sequence number ``through``; how many.

    The numbers of the records kept, and of those written after, stay the same: moto numbers a
    record ``starting_sequence_number + len(items)`` and finds it at that offset in ``items``.
    """
    count: int = min(max(0, through - shard.starting_sequence_number + 1), len(shard.items))
    if count:
        del shard.items[:count]
        shard.starting_sequence_number += count
    return count
