"""The reconciler's narrow window on ECS: run, describe, list and stop the fleet's tasks.

Every task carries its observer's marks three ways, so a console user and the reconciler both see
which task is which: ``startedBy`` (the name, shortened to ECS's 36 characters), tags
(``vigil:observer``, ``vigil:generation``, ``vigil:kind``), and the container's environment overrides
(``VIGIL_OBSERVER_NAME``, ``VIGIL_OBSERVER_GENERATION``), which are also what ECS events carry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from vigil.contract.hosts import HOST_ID_ENV, HOST_SLOTS_ENV, Capacity
from vigil.dynamo import error_code
from vigil.observers.decisions import MISSING, TaskState

NAME_ENV = "VIGIL_OBSERVER_NAME"
GENERATION_ENV = "VIGIL_OBSERVER_GENERATION"
TAG_OBSERVER = "vigil:observer"
TAG_GENERATION = "vigil:generation"
TAG_KIND = "vigil:kind"
TAG_HOST = "vigil:host"
DESCRIBE_BATCH = 100
LIST_PAGE = 100
MAX_CLIENT_TOKEN = 64
MAX_STARTED_BY = 36
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "ServerException",
        "ServiceUnavailableException",
        "LimitExceededException",
    }
)


SPOT_STRATEGY = [{"capacityProvider": "FARGATE_SPOT", "weight": 1}]


@dataclass(frozen=True)
class Launched:
    """What RunTask started: the task, the task definition it runs and the capacity it got."""

    arn: str
    task_definition: str
    capacity: Capacity


RUN_TASK_FAILURES = "RunTask failures: "
"""How a RunTask answer's ``failures`` list starts the reason (ECS started nothing)."""


class RunTaskFailed(Exception):
    """RunTask did not start the task: an error code or an entry of its ``failures`` list."""

    def __init__(self, reason: str, *, transient: bool, refused: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient
        self.refused = refused
        """ECS answered and started nothing (a ``failures`` entry such as Spot's "Capacity is
        unavailable at this time", or a refused request): a Spot kind asks on-demand at once."""
        self.on_demand = False
        """A Spot kind's on-demand fallback got no clear answer (a timeout, a throttle): it may
        have started the task, so every retry of this generation asks on-demand under the same
        token (ECS then answers with that task), never Spot again (that would start a second)."""


def client_token(name: str, incarnation: str, generation: int) -> str:
    """Idempotency key of one generation's RunTask, unique per incarnation of the name.

    ECS remembers a token for 24 hours, so an observer deleted and created again under the same name
    must not reuse its predecessor's tokens: ``incarnation`` (its creation time) is hashed in.
    """
    digest = hashlib.sha256(f"{name}\n{incarnation}".encode()).hexdigest()[:12]
    token = f"{name[:40]}-{digest}-{generation}"
    return token[:MAX_CLIENT_TOKEN]


def started_by(name: str) -> str:
    """The name itself when it fits ECS's 36 characters, else a readable prefix plus a hash."""
    return shortened(name, MAX_STARTED_BY)


def shortened(text: str, limit: int) -> str:
    """``text`` when it fits ``limit``, else a readable prefix plus a hash of the whole: two texts
    that differ only past the limit (host ids of a long kind name) stay distinct."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: limit - 9]}-{digest}"


def task_state(task: Mapping[str, Any]) -> TaskState:
    """A TaskState from a DescribeTasks entry or an ECS Task State Change event's ``detail``."""
    observer, generation, host = _marks(task)
    containers = task.get("containers") or []
    exit_codes = [c["exitCode"] for c in containers if c.get("exitCode") is not None]
    exit_code = next(
        (code for code in exit_codes if code != 0), exit_codes[0] if exit_codes else None
    )
    version = task.get("version")
    return TaskState(
        arn=str(task["taskArn"]),
        last_status=str(task.get("lastStatus", "")),
        version=int(version) if version is not None else None,
        observer=observer,
        generation=generation,
        stop_code=task.get("stopCode"),
        stopped_reason=task.get("stoppedReason") or None,
        exit_code=int(exit_code) if exit_code is not None else None,
        created_at=_time(task.get("createdAt")),
        stopped_at=_time(task.get("stoppedAt")),
        host=host,
    )


def _marks(task: Mapping[str, Any]) -> tuple[str | None, int | None, str | None]:
    values: dict[str, str] = {}
    for override in (task.get("overrides") or {}).get("containerOverrides") or []:
        for pair in override.get("environment") or []:
            values[str(pair.get("name"))] = str(pair.get("value"))
    for tag in task.get("tags") or []:
        if tag.get("key") == TAG_OBSERVER:
            values.setdefault(NAME_ENV, str(tag.get("value")))
        elif tag.get("key") == TAG_GENERATION:
            values.setdefault(GENERATION_ENV, str(tag.get("value")))
        elif tag.get("key") == TAG_HOST:
            values.setdefault(HOST_ID_ENV, str(tag.get("value")))
    name = values.get(NAME_ENV) or None
    raw = values.get(GENERATION_ENV)
    generation = int(raw) if raw is not None and raw.isdigit() else None
    return name, generation, values.get(HOST_ID_ENV) or None


def _time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


class EcsTasks:
    """RunTask/DescribeTasks/ListTasks/StopTask on the fleet's cluster, with the fleet's network."""

    def __init__(
        self,
        client: Any,
        *,
        cluster: str,
        task_definitions: Mapping[str, str],
        container_name: str,
        subnets: Sequence[str],
        security_groups: Sequence[str],
        assign_public_ip: bool,
        capacities: Mapping[str, Capacity] | None = None,
    ) -> None:
        self._client = client
        self._cluster = cluster
        self._task_definitions = dict(task_definitions)
        self._capacities = dict(capacities or {})
        self._container = container_name
        self._network = {
            "awsvpcConfiguration": {
                "subnets": list(subnets),
                "securityGroups": list(security_groups),
                "assignPublicIp": "ENABLED" if assign_public_ip else "DISABLED",
            }
        }

    def task_definition(self, kind: str) -> str | None:
        return self._task_definitions.get(kind)

    def run(self, *, name: str, kind: str, generation: int, incarnation: str) -> str:
        """Start the task of one generation; the ARN, or RunTaskFailed."""
        return self.launch(name=name, kind=kind, generation=generation, incarnation=incarnation).arn

    def launch(
        self, *, name: str, kind: str, generation: int, incarnation: str, on_demand: bool = False
    ) -> Launched:
        """Start the task of one observer's generation on the kind's capacity, or RunTaskFailed.

        ``on_demand``: this generation's fallback may already have started a task
        (:attr:`RunTaskFailed.on_demand`): a Spot kind asks on-demand only.
        """
        return self._launch(
            kind=kind,
            token=lambda fallback: client_token(
                name,
                f"{incarnation}\n{Capacity.ON_DEMAND}" if fallback else incarnation,
                generation,
            ),
            started=started_by(name),
            environment={NAME_ENV: name, GENERATION_ENV: str(generation)},
            tags={TAG_OBSERVER: name, TAG_GENERATION: str(generation), TAG_KIND: kind},
            on_demand=on_demand,
        )

    def run_host(self, *, host_id: str, kind: str, slots: int, on_demand: bool = False) -> str:
        """Start a pooled host's task; the host id is its clientToken (a retry never starts a
        second task for one host item). ``on_demand`` as for :meth:`launch` (the host item
        remembers an unanswered fallback: :attr:`Host.on_demand`)."""
        return self._launch(
            kind=kind,
            token=lambda fallback: shortened(
                f"{host_id}-od" if fallback else host_id, MAX_CLIENT_TOKEN
            ),
            started=started_by(host_id),
            environment={HOST_ID_ENV: host_id, HOST_SLOTS_ENV: str(slots)},
            tags={TAG_HOST: host_id, TAG_KIND: kind},
            on_demand=on_demand,
        ).arn

    def _launch(
        self,
        *,
        kind: str,
        token: Callable[[bool], str],
        started: str,
        environment: Mapping[str, str],
        tags: Mapping[str, str],
        on_demand: bool = False,
    ) -> Launched:
        """A Spot kind asks FARGATE_SPOT first; when ECS answers that it started nothing (Spot has
        no capacity: a ``failures`` entry, or a refused request) it asks on-demand at once, under
        a token of its own, ``token(True)`` (ECS refuses a token reused with other parameters).
        A timeout or a throttle is not an answer: it raises as transient, so the same request
        (the same token, on the same capacity) is retried. One generation, two tokens, and at
        most one of them ever starts a task::

            Spot(token) --refused--> on-demand(token+od) --timeout--> RunTaskFailed(on_demand)
                                                 retry: on-demand(token+od) --> the same task
        """
        definition = self._task_definitions.get(kind)
        if definition is None:
            raise RunTaskFailed(f"no task definition for kind {kind!r}", transient=False)
        request = self._request(kind, definition, started, environment, tags)
        if self._capacities.get(kind) is Capacity.SPOT:
            if not on_demand:
                spot = {"capacityProviderStrategy": SPOT_STRATEGY}
                try:
                    arn = self._run(request | spot | {"clientToken": token(False)})
                    return Launched(arn, definition, Capacity.SPOT)
                except RunTaskFailed as failed:
                    if not failed.refused:
                        raise
            try:
                arn = self._run(request | {"launchType": "FARGATE", "clientToken": token(True)})
            except RunTaskFailed as failed:
                failed.on_demand = not failed.refused
                raise
            return Launched(arn, definition, Capacity.ON_DEMAND)
        arn = self._run(request | {"launchType": "FARGATE", "clientToken": token(False)})
        return Launched(arn, definition, Capacity.ON_DEMAND)

    def _request(
        self,
        kind: str,
        definition: str,
        started: str,
        environment: Mapping[str, str],
        tags: Mapping[str, str],
    ) -> dict[str, Any]:
        return {
            "cluster": self._cluster,
            "taskDefinition": definition,
            "count": 1,
            "startedBy": started,
            "group": f"vigil:{kind}",
            "networkConfiguration": self._network,
            "overrides": {
                "containerOverrides": [
                    {
                        "name": self._container,
                        "environment": [{"name": k, "value": v} for k, v in environment.items()],
                    }
                ]
            },
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
            "enableECSManagedTags": True,
        }

    def _run(self, request: dict[str, Any]) -> str:
        try:
            response = self._client.run_task(**request)
        except ClientError as error:
            code = error_code(error)
            transient = code in TRANSIENT_CODES
            raise RunTaskFailed(
                f"{code}: {error}", transient=transient, refused=not transient
            ) from error
        except BotoCoreError as error:  # a timeout or a lost connection: the same token retries
            raise RunTaskFailed(f"{type(error).__name__}: {error}", transient=True) from error
        failures = response.get("failures") or []
        if failures:
            reasons = "; ".join(
                f"{f.get('reason')} {f.get('detail') or ''}".strip() for f in failures
            )
            raise RunTaskFailed(f"{RUN_TASK_FAILURES}{reasons}", transient=True, refused=True)
        tasks = response.get("tasks") or []
        if not tasks:
            raise RunTaskFailed("RunTask returned no task and no failure", transient=True)
        return str(tasks[0]["taskArn"])

    def describe(self, arns: Iterable[str]) -> dict[str, TaskState]:
        """Every ARN asked for, in batches of 100; tasks ECS does not know come back MISSING."""
        wanted = list(dict.fromkeys(arns))
        states: dict[str, TaskState] = {}
        for start in range(0, len(wanted), DESCRIBE_BATCH):
            batch = wanted[start : start + DESCRIBE_BATCH]
            response = self._client.describe_tasks(
                cluster=self._cluster, tasks=batch, include=["TAGS"]
            )
            for task in response.get("tasks") or []:
                state = task_state(task)
                states[state.arn] = state
            for arn in batch:
                states.setdefault(arn, TaskState(arn=arn, last_status=MISSING))
        return states

    def running(self) -> list[str]:
        """ARNs of the cluster's tasks that should run: one ListTasks page per 100 tasks."""
        arns: list[str] = []
        token: str | None = None
        while True:
            request: dict[str, Any] = {
                "cluster": self._cluster,
                "desiredStatus": "RUNNING",
                "maxResults": LIST_PAGE,
            }
            if token:
                request["nextToken"] = token
            response = self._client.list_tasks(**request)
            arns.extend(str(arn) for arn in response.get("taskArns") or [])
            token = response.get("nextToken")
            if not token:
                return arns

    def stop(self, arn: str, reason: str) -> None:
        self._client.stop_task(cluster=self._cluster, task=arn, reason=reason[:255])
