"""Where an application finds each task's queue, table and scheduler role: the catalog.

The stack keeps it in SSM parameters (``vigil.catalog``): an application names the stack
(``VIGIL_STACK``) and reads it once a minute at most, or is handed a catalog as JSON
(``VIGIL_TASKS_CATALOG``, e.g. ``BackgroundTask``'s ``catalog(tasks)`` for a few tasks), so
``enqueue`` needs no lookup of its own: one SendMessage and one PutItem per task.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from vigil.catalog import STACK_ENV, CatalogParts, Kept, read_catalog
from vigil.clock import Clock, system_clock
from vigil.contract.layout import Catalogued
from vigil.contract.tasks import (
    CATALOG_ENV,
    DEFAULT_COMPLETION_EVENTS,
    NORMAL_PRIORITY,
    SCHEDULE_GROUP,
    TASK_NAME,
    CatalogField,
    CompletionEvents,
)
from vigil.settings import SettingsError
from vigil.tasks.errors import InvalidTask, UnknownTask


@dataclass(frozen=True)
class TaskSpec:
    """One task as the catalog declares it."""

    name: str
    queue_url: str
    table: str
    dead_letter_url: str = ""
    ordered: bool = False
    retention: timedelta = timedelta(days=7)
    scheduler_role_arn: str = ""
    """Empty: no ``at`` beyond SQS's 15-minute delay for this task."""
    schedule_group: str = SCHEDULE_GROUP
    function: str = ""
    completion_events: CompletionEvents = DEFAULT_COMPLETION_EVENTS
    """Which outcomes the task announces on EventBridge: what a subscriber can expect."""
    visibility_timeout: timedelta = timedelta(hours=12)
    """The queue's visibility timeout (a catalog without it: SQS's longest, the safe bound)."""
    max_queue_age: timedelta = timedelta(minutes=15)
    max_duration: timedelta | None = None
    """``BackgroundTask(max_duration=)``: the tasks audit looks for its records not ended past
    their deadline (None: it declares none)."""
    priority_queues: Mapping[str, str] = field(default_factory=dict)
    """``{level: queue URL}``: the levels ``BackgroundTask(priorities=...)`` declared."""

    def queue_for(self, priority: str | None) -> str:
        """The queue of ``priority`` (None or ``normal``: the task's own); an undeclared level
        is :class:`InvalidTask` naming ``priority`` and the levels there are."""
        if priority is None or priority == NORMAL_PRIORITY:
            return self.queue_url
        if not isinstance(priority, str) or priority not in self.priority_queues:
            levels = [NORMAL_PRIORITY, *sorted(self.priority_queues)]
            raise InvalidTask(
                "priority", f"task {self.name} has no priority {priority!r}: one of {levels}"
            )
        return self.priority_queues[priority]

    @property
    def retry_due_within(self) -> timedelta:
        """How long after its ``retry_at`` a waiting retry's message must have claimed the
        record: its backoff not set (it comes back after the visibility timeout), then a wait in
        the queue short of the queue-age alarm. Past that, nothing holds the task."""
        return self.visibility_timeout + self.max_queue_age

    @classmethod
    def from_json(cls, name: str, raw: Any) -> TaskSpec:
        if not TASK_NAME.match(name):
            raise SettingsError(f"{CATALOG_ENV}: {name!r} is not a task name")
        if not isinstance(raw, Mapping):
            raise SettingsError(f"{CATALOG_ENV}: task {name} must be a JSON object")
        missing = [f for f in (CatalogField.QUEUE_URL, CatalogField.TABLE) if not raw.get(f)]
        if missing:
            raise SettingsError(f"{CATALOG_ENV}: task {name} has no {', '.join(missing)}")
        retention = raw.get(CatalogField.RETENTION_SECONDS, 7 * 86400)
        if not isinstance(retention, int | float) or retention <= 0:
            raise SettingsError(f"{CATALOG_ENV}: task {name}: retention_seconds must be > 0")
        announced = raw.get(CatalogField.COMPLETION_EVENTS, DEFAULT_COMPLETION_EVENTS)
        choices = [choice.value for choice in CompletionEvents]
        if announced not in choices:
            raise SettingsError(
                f"{CATALOG_ENV}: task {name}: completion_events must be one of {choices}, "
                f"got {announced!r}"
            )
        return cls(
            name=name,
            queue_url=str(raw[CatalogField.QUEUE_URL]),
            table=str(raw[CatalogField.TABLE]),
            dead_letter_url=str(raw.get(CatalogField.DEAD_LETTER_URL, "")),
            ordered=bool(raw.get(CatalogField.ORDERED, False)),
            retention=timedelta(seconds=retention),
            scheduler_role_arn=str(raw.get(CatalogField.SCHEDULER_ROLE_ARN, "")),
            schedule_group=str(raw.get(CatalogField.SCHEDULE_GROUP) or SCHEDULE_GROUP),
            function=str(raw.get(CatalogField.FUNCTION, "")),
            completion_events=CompletionEvents(announced),
            visibility_timeout=_seconds(raw, CatalogField.VISIBILITY_TIMEOUT_SECONDS, name)
            or cls.visibility_timeout,
            max_queue_age=_seconds(raw, CatalogField.MAX_QUEUE_AGE_SECONDS, name)
            or cls.max_queue_age,
            max_duration=_seconds(raw, CatalogField.MAX_DURATION_SECONDS, name),
            priority_queues=_levels(raw, name),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            CatalogField.QUEUE_URL: self.queue_url,
            CatalogField.DEAD_LETTER_URL: self.dead_letter_url,
            CatalogField.TABLE: self.table,
            CatalogField.ORDERED: self.ordered,
            CatalogField.RETENTION_SECONDS: int(self.retention.total_seconds()),
            CatalogField.SCHEDULER_ROLE_ARN: self.scheduler_role_arn,
            CatalogField.SCHEDULE_GROUP: self.schedule_group,
            CatalogField.FUNCTION: self.function,
            CatalogField.COMPLETION_EVENTS: self.completion_events.value,
            CatalogField.VISIBILITY_TIMEOUT_SECONDS: int(self.visibility_timeout.total_seconds()),
            CatalogField.MAX_QUEUE_AGE_SECONDS: int(self.max_queue_age.total_seconds()),
            **(
                {CatalogField.MAX_DURATION_SECONDS: int(self.max_duration.total_seconds())}
                if self.max_duration is not None
                else {}
            ),
            **(
                {CatalogField.PRIORITY_QUEUE_URLS: dict(self.priority_queues)}
                if self.priority_queues
                else {}
            ),
        }


def _levels(raw: Mapping[str, Any], task: str) -> dict[str, str]:
    """``priority_queue_urls``: a JSON object of level names to queue URLs (absent: none)."""
    value = raw.get(CatalogField.PRIORITY_QUEUE_URLS) or {}
    if not isinstance(value, Mapping) or not all(
        isinstance(level, str) and isinstance(url, str) and url for level, url in value.items()
    ):
        raise SettingsError(
            f"{CATALOG_ENV}: task {task}: {CatalogField.PRIORITY_QUEUE_URLS} must be an object "
            "of level names to queue URLs"
        )
    return dict(value)


def _seconds(raw: Mapping[str, Any], field: CatalogField, task: str) -> timedelta | None:
    """An optional duration in whole seconds (absent: None, a catalog from before it)."""
    value = raw.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SettingsError(f"{CATALOG_ENV}: task {task}: {field} must be a positive integer")
    return timedelta(seconds=value)


class Catalog(Mapping[str, TaskSpec]):
    """The stack's tasks by name; :meth:`spec` refuses an unknown one naming those that exist.

    Given whole (``VIGIL_TASKS_CATALOG``, a test's) or read from the stack's catalog in SSM
    (:meth:`from_stack`): then read again each minute, and at once for a name it does not know
    (a deploy may just have added the task), before refusing it.
    """

    def __init__(self, specs: Mapping[str, TaskSpec], *, source: Kept | None = None) -> None:
        self._specs = dict(specs)
        self._source = source

    @classmethod
    def from_parts(cls, parts: CatalogParts) -> Catalog:
        """The stack's catalog as stored: each entry with what every task shares."""
        return cls(
            {
                name: TaskSpec.from_json(name, {**parts.shared, **entry})
                for name, entry in parts.entries.items()
            }
        )

    @classmethod
    def from_stack(cls, ssm: Any, stack: str, *, clock: Clock = system_clock) -> Catalog:
        """The stack's tasks catalog (``vigil.catalog``), kept a minute at a time."""
        source = Kept(
            lambda: cls.from_parts(read_catalog(ssm, stack, Catalogued.TASKS))._specs, clock=clock
        )
        return cls(source.get(), source=source)

    def _current(self) -> dict[str, TaskSpec]:
        if self._source is not None:
            self._specs = self._source.get()
        return self._specs

    @classmethod
    def parse(cls, text: str) -> Catalog:
        """The ``TasksCatalog`` output's JSON; a :class:`SettingsError` says what is wrong."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise SettingsError(f"{CATALOG_ENV} is not JSON: {error}") from None
        if not isinstance(raw, dict):
            raise SettingsError(f"{CATALOG_ENV} must be a JSON object of tasks")
        return cls({name: TaskSpec.from_json(name, spec) for name, spec in raw.items()})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, ssm: Any = None) -> Catalog:
        """``VIGIL_TASKS_CATALOG`` (a catalog given whole), else the catalog of the stack
        ``VIGIL_STACK`` names (``ssm``: a client, else boto3's)."""
        text = environ.get(CATALOG_ENV, "").strip()
        if text:
            return cls.parse(text)
        stack = environ.get(STACK_ENV, "").strip()
        if not stack:
            raise SettingsError(
                f"environment variable {STACK_ENV} (the stack's name: its tasks catalog) or "
                f"{CATALOG_ENV} (a catalog as JSON) is required"
            )
        if ssm is None:
            import boto3

            ssm = boto3.client("ssm")
        return cls.from_stack(ssm, stack)

    def spec(self, task: str) -> TaskSpec:
        specs = self._current()
        if task not in specs and self._source is not None:
            specs = self._specs = self._source.refresh()
        try:
            return specs[task]
        except KeyError:
            raise UnknownTask(task, specs) from None

    def to_json(self) -> str:
        specs = self._current()
        return json.dumps({name: spec.to_json() for name, spec in sorted(specs.items())})

    def __getitem__(self, task: str) -> TaskSpec:
        return self._current()[task]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())
