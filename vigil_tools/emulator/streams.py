"""DynamoDB stream event source mappings, delivered in-process as Lambda's stream poller would.

moto keeps a table's stream, but for a table with an event source mapping it tries to run the
function in Docker on every write and, when that fails, drops the stream's records (and prints the
Docker errors). :func:`detach_moto_delivery` stops that; :class:`StreamMapping` then reads the
stream through the DynamoDB Streams API from where the mapping starts, applies the mapping's
filter criteria, and hands the records to the function in batches of the mapping's size, shaped as
Lambda delivers them.

Not emulated: the poller's retries, bisection and on-failure destination. A batch the function
fails on raises :class:`BatchFailed` (a local run should never produce one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from vigil_tools.emulator.lambda_runtime import Invocation, LocalLambda

Invoke = Callable[[str, Any], Invocation]


class BatchFailed(RuntimeError):
    """The function raised on a batch; the poller's retries are not emulated."""


def detach_moto_delivery(session: Any, table_name: str) -> None:
    """Stop moto invoking (through Docker) the functions mapped to a table's stream.

    The mapping stays in the Lambda API, where :class:`StreamMapping` reads its settings.
    """
    from moto.dynamodb.models import dynamodb_backends

    account = session.client("sts").get_caller_identity()["Account"]
    table = dynamodb_backends[account][session.region_name].get_table(table_name)
    table.lambda_event_source_mappings.clear()


@dataclass
class StreamMapping:
    """One DynamoDB stream event source mapping of one function, polled on demand."""

    session: Any
    function: str
    mapping: dict[str, Any]
    _after: dict[str, int | None] = field(default_factory=dict)

    @cached_property
    def _streams(self) -> Any:
        """One DynamoDB Streams client for the mapping's life: it is polled after every step
        of a test's clock, and a new client costs more than the poll."""
        return self.session.client("dynamodbstreams")

    @classmethod
    def of(cls, session: Any, function: str) -> StreamMapping:
        """The function's one DynamoDB stream mapping, positioned where it starts (LATEST: now)."""
        client = session.client("lambda")
        mappings = [
            m
            for m in client.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
            if ":dynamodb:" in m.get("EventSourceArn", "")
        ]
        if len(mappings) != 1:
            raise LookupError(f"{function} has {len(mappings)} DynamoDB stream mappings")
        stream = cls(session, function, mappings[0])
        detach_moto_delivery(session, stream.table_name)
        stream._position(mappings[0].get("StartingPosition", "LATEST"))
        return stream

    @classmethod
    def of_table(cls, session: Any, table_name: str, *, function: str = "") -> StreamMapping:
        """A table's stream read as a mapping without filters would deliver it, from now on (for
        a harness that hands the records to the reconciler itself, with no function deployed)."""
        arn = session.client("dynamodb").describe_table(TableName=table_name)["Table"]
        stream = cls(session, function, {"EventSourceArn": arn["LatestStreamArn"]})
        stream._position("LATEST")
        return stream

    @property
    def stream_arn(self) -> str:
        return str(self.mapping["EventSourceArn"])

    @property
    def table_name(self) -> str:
        return self.stream_arn.split(":table/", 1)[1].split("/stream/", 1)[0]

    def passed(self) -> dict[str, int | None]:
        """The last sequence number already behind the mapping, by table name (None: nothing
        yet): the records up to it are never read again (``moto_memory.StreamTrim`` drops them).
        """
        positions = [after for after in self._after.values() if after is not None]
        return {self.table_name: min(positions) if len(positions) == len(self._after) else None}

    def _position(self, starting_position: str) -> None:
        """Remember, per shard, the last sequence number already behind the mapping.

        Each poll opens a fresh iterator after it: moto replaces a table (and its stream shard)
        with a copy when a transaction is cancelled, which strands any iterator kept open.
        """
        shards = self._streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        for shard in shards:
            self._after[shard["ShardId"]] = None
            if starting_position == "LATEST":
                seen = [int(r["dynamodb"]["SequenceNumber"]) for r in self._read(shard["ShardId"])]
                # Nothing written yet: everything from the start of the shard is new.
                self._after[shard["ShardId"]] = max(seen) if seen else None

    def _read(self, shard: str) -> list[dict[str, Any]]:
        streams = self._streams
        after = self._after.get(shard)
        position: dict[str, Any] = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": str(after)}
            if after is not None
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        iterator = streams.get_shard_iterator(StreamArn=self.stream_arn, ShardId=shard, **position)[
            "ShardIterator"
        ]
        records: list[dict[str, Any]] = []
        while iterator:
            answer = streams.get_records(ShardIterator=iterator)
            if not answer.get("Records"):
                break
            records += answer["Records"]
            iterator = answer.get("NextShardIterator")
        return records

    def poll(self) -> list[dict[str, Any]]:
        """The records written since the last poll that pass the mapping's filters, in order."""
        region = self.session.region_name
        records: list[dict[str, Any]] = []
        for shard in self._after:
            for raw in self._read(shard):
                self._after[shard] = int(raw["dynamodb"]["SequenceNumber"])
                record = _lambda_record(raw, region, self.stream_arn)
                if self.passes(record):
                    records.append(record)
        return records

    def passes(self, record: Mapping[str, Any]) -> bool:
        filters = (self.mapping.get("FilterCriteria") or {}).get("Filters") or []
        return not filters or any(
            _matches(json.loads(f["Pattern"]), record) for f in filters if "Pattern" in f
        )

    def deliver(self, invoke: Invoke) -> list[Invocation]:
        """Poll once and invoke the function with each batch; one Invocation per batch."""
        records = self.poll()
        size = int(self.mapping.get("BatchSize", 100))
        results = []
        for batch in _chunks(records, size):
            result = invoke(self.function, {"Records": batch})
            if not result.ok:
                raise BatchFailed(
                    f"{self.function} failed on a stream batch: "
                    f"{result.error_type}: {result.error_message}"
                )
            results.append(result)
        return results

    def deliver_to(self, runtime: LocalLambda) -> list[Invocation]:
        return self.deliver(runtime.invoke)


@dataclass
class StreamMappings:
    """Every DynamoDB stream mapping of one function (the reconciler's registry; during an upgrade
    from a name-keyed registry, that table's too), delivered one after the other."""

    session: Any
    function: str
    mappings: list[StreamMapping]

    @classmethod
    def of(cls, session: Any, function: str) -> StreamMappings:
        found = cls(session, function, [])
        found.refresh()
        if not found.mappings:
            raise LookupError(f"{function} has no DynamoDB stream mapping")
        return found

    def refresh(self) -> None:
        """Read the function's mappings again (after a deploy): one already polled keeps its
        place in its stream and takes its new settings (filters); a new one starts where its
        mapping says (LATEST: now); one gone is dropped."""
        known = {m.mapping.get("UUID"): m for m in self.mappings}
        listed = self.session.client("lambda").list_event_source_mappings(
            FunctionName=self.function
        )["EventSourceMappings"]
        mappings = []
        for config in (m for m in listed if ":dynamodb:" in m.get("EventSourceArn", "")):
            mapping = known.get(config.get("UUID"))
            if mapping is not None and mapping.stream_arn == config["EventSourceArn"]:
                mapping.mapping = config
            else:
                mapping = StreamMapping(self.session, self.function, config)
                detach_moto_delivery(self.session, mapping.table_name)
                mapping._position(config.get("StartingPosition", "LATEST"))
            mappings.append(mapping)
        self.mappings = mappings

    def deliver(self, invoke: Invoke) -> list[Invocation]:
        """Each mapping's poll, in turn; one Invocation per batch."""
        return [result for mapping in self.mappings for result in mapping.deliver(invoke)]

    def deliver_to(self, runtime: LocalLambda) -> list[Invocation]:
        return self.deliver(runtime.invoke)

    def passed(self) -> dict[str, int | None]:
        return {table: at for m in self.mappings for table, at in m.passed().items()}


def _lambda_record(raw: Mapping[str, Any], region: str, source_arn: str) -> dict[str, Any]:
    """A DynamoDB Streams API record as Lambda's event carries it (times as epoch seconds)."""
    change = dict(raw["dynamodb"])
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = int(created.timestamp())
    return {
        "eventID": raw["eventID"],
        "eventName": raw["eventName"],
        "eventVersion": raw.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": change,
        "eventSourceARN": source_arn,
    }


def _matches(pattern: Mapping[str, Any], value: Any) -> bool:
    """Lambda event filtering, the subset mappings here use: nested keys, lists of literal values
    (any may match) and ``{"exists": bool}``."""
    if not isinstance(value, Mapping):
        return False
    for key, wanted in pattern.items():
        present = key in value
        if isinstance(wanted, Mapping):
            if not present or not _matches(wanted, value[key]):
                return False
            continue
        if not isinstance(wanted, list):
            raise NotImplementedError(f"filter value {wanted!r} (expected a list)")
        if not any(_one(option, present, value.get(key)) for option in wanted):
            return False
    return True


def _one(option: Any, present: bool, actual: Any) -> bool:
    if isinstance(option, Mapping):
        if set(option) == {"exists"}:
            return present is bool(option["exists"])
        raise NotImplementedError(f"filter operator {sorted(option)}")
    return present and actual == option


def _chunks(items: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(items), max(1, size)):
        yield items[start : start + size]
