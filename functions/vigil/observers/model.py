"""The observer record: its statuses, its validation rules and its DynamoDB item shape.

Every part of the observer system (API, CLI, container runtime, reconciler) reads and writes
observers through these types, so the item stays readable as plain attributes in the console.

Statuses, and the seed orchestrator's names for them:

========  ==========================================================  ===============
Status    Meaning                                                     Seed
========  ==========================================================  ===============
PENDING   registered, no task yet (or waiting out a crash backoff)    Created
STARTING  RunTask accepted for the current generation                 Processing
RUNNING   the current generation's container claimed and heartbeats   Processing
STOPPING  stop requested; the task is being stopped                   OnDeleting
STOPPED   no task runs and none is wanted                             Deleted
FAILED    gave up after too many consecutive crashes (see reason)     (none)
========  ==========================================================  ===============
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vigil.clock import epoch_ms, from_epoch_ms, iso
from vigil.contract.hosts import OBSERVER_HOST, OBSERVER_TASK_DEFINITION
from vigil.contract.journal import UNCERTAIN_EFFECT_ATTRIBUTE
from vigil.contract.observers import (
    FLEET_ATTRIBUTE,
    STATUS_REASON,
    STOPPED_ATTRIBUTE,
    UNCERTAIN_REASON,
    status_fields,
)
from vigil.contract.observers import FLEET_INDEX as FLEET_INDEX
from vigil.contract.observers import FLEET_INDEX_ATTRIBUTES as FLEET_INDEX_ATTRIBUTES
from vigil.contract.observers import FLEET_PARTITION as FLEET_PARTITION
from vigil.contract.observers import Desired as Desired
from vigil.contract.observers import Status as Status
from vigil.dynamo import to_wire

NAME_PATTERN = re.compile(r"^[a-z0-9-]{1,63}$")
MAX_CONFIG_BYTES = 32 * 1024
MAX_CHECKPOINT_BYTES = 64 * 1024
FLEET_COUNTER_NAME = "#fleet"
"""Key of the one non-observer item in the registry: ``active`` counts observers whose desired state
is RUNNING, so creating one can check the fleet maximum in the same transaction. The name can never
be an observer's (``#`` is outside the name pattern) and the item has no ``fleet`` attribute, so it
is absent from both fleet indexes; stream consumers skip it with ``is_observer_item``."""


HANDED_OVER_STOP_CODES = ("UserInitiated", "SpotInterruption")
"""ECS stop codes of a task told to stop (StopTask, a Spot interruption): the container got SIGTERM
and checkpointed, so a clean exit restarts without counting a failure."""


class UnreadableRecord(ValueError):
    """An item in an observer's place that no writer of Vigil's makes: a status that is none, a
    record without ``created_at``. A kind's task role may UpdateItem its own partition, so a
    compromised or buggy container can leave one there (under any name, another kind's
    observer's too). Whatever walks the fleet skips it and says so, rather than stop a pass over
    every kind's observers at it."""

    def __init__(self, item: Mapping[str, Any], error: Exception) -> None:
        self.name = str(item.get("name", ""))
        self.kind = str(item.get("kind", ""))
        super().__init__(
            f"observer record {self.kind}/{self.name} unreadable: {type(error).__name__}: {error}"
        )


@contextmanager
def reading(item: Mapping[str, Any]) -> Iterator[None]:
    """Parse ``item`` inside: a missing or malformed attribute raises :class:`UnreadableRecord`."""
    try:
        yield
    except UnreadableRecord:
        raise
    except (KeyError, ValueError, TypeError, AttributeError, ArithmeticError) as error:
        raise UnreadableRecord(item, error) from error


def skipped(error: UnreadableRecord) -> None:
    """Say that a reader walking the fleet left ``error``'s item out (a person removes it)."""
    from vigil.telemetry import logger  # (telemetry is heavier than the model: when needed)

    logger().error(
        "observer record skipped: no writer of Vigil's makes it",
        extra={"observer": error.name, "kind": error.kind, "error": str(error)},
    )


class InvalidObserver(ValueError):
    """A name, kind or config that can never be valid; the message says which and why."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.field = field_name
        self.problem = problem


def validate_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidObserver("name", "is required and must be a string")
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidObserver("name", f"{name!r} must match [a-z0-9-]{{1,63}}")
    return name


def validate_config(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise InvalidObserver("config", f"must be a JSON object, got {type(config).__name__}")
    size = _storable_size("config", config)
    if size > MAX_CONFIG_BYTES:
        raise InvalidObserver("config", f"is {size} bytes, at most {MAX_CONFIG_BYTES} allowed")
    return config


_NUMBER_RULE = (
    "numbers must be finite, with at most 38 significant digits and a magnitude between "
    "1e-130 and 1e126 to fit DynamoDB"
)
_MIN_MAGNITUDE = decimal.Decimal("1e-130")
_MAX_MAGNITUDE = decimal.Decimal("1e126")


def _storable_size(field_name: str, value: dict[str, Any]) -> int:
    """The JSON size of ``value``, once it is known that DynamoDB can store it as it is.

    JSON allows numbers DynamoDB refuses (NaN, Infinity, 1e400, 42 digits, 1e-200); finding them
    here makes them the caller's mistake (a 422) instead of a crash in the write that follows.
    """
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError as error:  # NaN, Infinity, -Infinity (1e400 parses as Infinity)
        raise InvalidObserver(field_name, f"{_NUMBER_RULE}: {error}") from error
    except TypeError as error:
        raise InvalidObserver(field_name, f"must be JSON-serializable: {error}") from error
    try:
        to_wire({"c": value})
    except (TypeError, decimal.DecimalException) as error:
        raise InvalidObserver(field_name, f"{_NUMBER_RULE}: {type(error).__name__}") from error
    for number in _numbers(value):
        magnitude = abs(decimal.Decimal(str(number)))
        if magnitude and not _MIN_MAGNITUDE <= magnitude < _MAX_MAGNITUDE:
            raise InvalidObserver(field_name, f"{_NUMBER_RULE}: got {number!r}")
    return len(text.encode())


def _numbers(value: Any) -> Iterator[int | float]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield value


KIND_TARGET = re.compile(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*$")


def parse_kinds(raw: str) -> dict[str, str]:
    """``VIGIL_OBSERVER_KINDS``: a JSON object of kind -> "module.function"."""
    try:
        kinds = json.loads(raw)
    except ValueError as error:
        raise InvalidObserver("kinds", f"not JSON: {error}") from error
    if not isinstance(kinds, dict) or not kinds:
        raise InvalidObserver(
            "kinds", 'must be a non-empty JSON object {"kind": "module.function"}'
        )
    for kind, target in kinds.items():
        if not NAME_PATTERN.fullmatch(kind):
            raise InvalidObserver("kinds", f"kind {kind!r} must match [a-z0-9-]{{1,63}}")
        if not isinstance(target, str) or not KIND_TARGET.fullmatch(target):
            raise InvalidObserver("kinds", f"{kind!r} -> {target!r} is not 'module.function'")
    return dict(kinds)


def validate_checkpoint(state: Any) -> dict[str, Any]:
    if not isinstance(state, dict):
        raise InvalidObserver("checkpoint", f"must be a dict, got {type(state).__name__}")
    size = _storable_size("checkpoint", state)
    if size > MAX_CHECKPOINT_BYTES:
        raise InvalidObserver(
            "checkpoint", f"is {size} bytes, at most {MAX_CHECKPOINT_BYTES} allowed"
        )
    return state


def is_observer_item(item: dict[str, Any] | None) -> bool:
    """True for an observer's item (in the fleet index, or the stopped one), False for the fleet
    counter, a lease or a marker (or nothing)."""
    return item is not None and FLEET_PARTITION in (
        item.get(FLEET_ATTRIBUTE),
        item.get(STOPPED_ATTRIBUTE),
    )


@dataclass(frozen=True)
class LastExit:
    """How the previous task ended, as ECS reported it."""

    stop_code: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    task_arn: str | None = None
    at: datetime | None = None

    @property
    def crashed(self) -> bool:
        """A task that stopped without being asked to, or with a non-zero exit code.

        A Spot interruption is a stop asked of the container (SIGTERM, two minutes' notice), the
        same hand-over as a rollout's StopTask: a clean exit after it is no failure.
        """
        if self.stop_code in HANDED_OVER_STOP_CODES and self.exit_code in (None, 0):
            return False
        return self.exit_code != 0 or self.stop_code not in (None, *HANDED_OVER_STOP_CODES)

    def to_json(self) -> dict[str, Any]:
        return {
            "stop_code": self.stop_code,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "task_arn": self.task_arn,
            "at": iso(self.at) if self.at else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> LastExit | None:
        if not data:
            return None
        return cls(
            stop_code=data.get("stop_code"),
            exit_code=data.get("exit_code"),
            reason=data.get("reason"),
            task_arn=data.get("task_arn"),
            at=datetime.fromisoformat(data["at"]) if data.get("at") else None,
        )


@dataclass(frozen=True)
class Observer:
    name: str
    kind: str
    config: dict[str, Any]
    desired: Desired
    status: Status
    created_at: datetime
    updated_at: datetime
    version: int = 1
    generation: int = 0
    task_arn: str | None = None
    restarts: int = 0
    consecutive_failures: int = 0
    heartbeat_at: datetime | None = None
    checkpoint: dict[str, Any] | None = None
    last_exit: LastExit | None = None
    next_start_at: datetime | None = None
    failure_reason: str | None = None
    status_reason: str | None = None
    """Why it is not running yet (a failed RunTask, waiting for a host), while it waits."""
    restart_generation: int | None = None
    """Set by a restart request: a task of this generation or an older one must be replaced."""
    host: str | None = None
    """Pooled: the host its current generation is placed on (None for a dedicated observer)."""
    task_definition: str | None = None
    """The task definition ARN (with revision) its current generation was started or placed
    with: the one reading of ``OBSERVER_TASK_DEFINITION`` (rollouts and the API use it)."""
    uncertain_effect: str | None = None
    """``ctx.once`` stopped it UNCERTAIN on this effect, until ``vigil observers settle``."""
    uncertain_reason: str | None = None
    """Why (the effect's intent: which generation began it, when)."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The API's observer representation."""
        return {
            "name": self.name,
            "kind": self.kind,
            "config": self.config,
            "desired": self.desired.value,
            "status": self.status.value,
            "task_arn": self.task_arn,
            "generation": self.generation,
            "restarts": self.restarts,
            "consecutive_failures": self.consecutive_failures,
            "heartbeat_at": iso(self.heartbeat_at) if self.heartbeat_at else None,
            "checkpoint": self.checkpoint,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "last_exit": self.last_exit.to_json() if self.last_exit else None,
            "failure_reason": self.failure_reason,
            "status_reason": self.status_reason,
            "host": self.host,
            "task_definition": self.task_definition,
            "uncertain_effect": self.uncertain_effect,
            "uncertain_reason": self.uncertain_reason,
        }


def to_item(observer: Observer) -> dict[str, Any]:
    """Plain attributes; times both as ISO text (for people) and epoch ms (for conditions)."""
    item: dict[str, Any] = {
        "name": observer.name,
        "kind": observer.kind,
        "config": observer.config,
        "desired": observer.desired.value,
        **status_fields(observer.status)[0],
        "generation": observer.generation,
        "restarts": observer.restarts,
        "consecutive_failures": observer.consecutive_failures,
        "created_at": iso(observer.created_at),
        "updated_at": iso(observer.updated_at),
        "version": observer.version,
    }
    if observer.task_arn:
        item["task_arn"] = observer.task_arn
    if observer.heartbeat_at:
        item["heartbeat_at"] = iso(observer.heartbeat_at)
        item["heartbeat_at_ms"] = epoch_ms(observer.heartbeat_at)
    if observer.checkpoint is not None:
        item["checkpoint"] = observer.checkpoint
    if observer.last_exit:
        item["last_exit"] = observer.last_exit.to_json()
    if observer.next_start_at:
        item["next_start_at"] = iso(observer.next_start_at)
        item["next_start_at_ms"] = epoch_ms(observer.next_start_at)
    if observer.failure_reason:
        item["failure_reason"] = observer.failure_reason
    if observer.status_reason:
        item[STATUS_REASON] = observer.status_reason
    if observer.restart_generation is not None:
        item["restart_generation"] = observer.restart_generation
    if observer.host:
        item[OBSERVER_HOST] = observer.host
    if observer.task_definition:
        item[OBSERVER_TASK_DEFINITION] = observer.task_definition
    return item


def from_item(item: dict[str, Any]) -> Observer:
    """Read an item written by ``to_item`` (or its projection in the fleet index, minus config);
    :class:`UnreadableRecord` for one no writer of ours made."""
    with reading(item):
        return _observer(item)


def _observer(item: dict[str, Any]) -> Observer:
    return Observer(
        name=item["name"],
        kind=item.get("kind", ""),
        config=item.get("config") or {},
        desired=Desired(item.get("desired", Desired.RUNNING)),
        status=Status(item.get("status", Status.PENDING)),
        created_at=datetime.fromisoformat(item["created_at"]),
        updated_at=datetime.fromisoformat(item["updated_at"]),
        version=int(item.get("version", 1)),
        generation=int(item.get("generation", 0)),
        task_arn=item.get("task_arn"),
        restarts=int(item.get("restarts", 0)),
        consecutive_failures=int(item.get("consecutive_failures", 0)),
        heartbeat_at=from_epoch_ms(int(item["heartbeat_at_ms"]))
        if "heartbeat_at_ms" in item
        else None,
        checkpoint=item.get("checkpoint"),
        last_exit=LastExit.from_json(item.get("last_exit")),
        next_start_at=from_epoch_ms(int(item["next_start_at_ms"]))
        if "next_start_at_ms" in item
        else None,
        failure_reason=item.get("failure_reason"),
        status_reason=item.get(STATUS_REASON),
        restart_generation=int(item["restart_generation"])
        if "restart_generation" in item
        else None,
        host=item.get(OBSERVER_HOST),
        task_definition=item.get(OBSERVER_TASK_DEFINITION),
        uncertain_effect=item.get(UNCERTAIN_EFFECT_ATTRIBUTE),
        uncertain_reason=item.get(UNCERTAIN_REASON),
    )
