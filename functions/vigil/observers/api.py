"""The observers management API: Powertools' REST resolver over the registry.

Requests are validated (``enable_validation``) before any logic runs, and every error, whether a
validation failure or a domain exception, becomes ``{"error": code, "message": ...}`` in one
place (``vigil.http_answers``). Nothing is written for a rejected request: validation happens first,
and the registry's writes are single conditional requests.

``POST /observers`` honours an ``Idempotency-Key`` header through Powertools' idempotency utility:
the same key (per caller) with the same body replays the first answer; with another body it is
refused with 422. The app is built by ``build_app`` from its dependencies, so nothing is built at
import time and tests inject moto-backed clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer
from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from vigil import __version__, idempotent_requests, telemetry
from vigil.clock import Clock, system_clock
from vigil.contract.api_errors import ErrorCode, invalid
from vigil.contract.hosts import (
    DEFAULT_REBALANCE_MOVES,
    HOSTS_TABLE_ENV,
    MAX_REBALANCE_MOVES,
    PLACEMENTS_ENV,
)
from vigil.contract.journal import Verdict
from vigil.contract.observers import LEGACY_REGISTRY_TABLE_ENV
from vigil.effects.journal import EFFECT_NAME
from vigil.http_answers import (
    answer_unknown_routes,
    caller_of,
    domain_error_response,
    error_body,
    validation_response,
)
from vigil.idempotent_requests import HEADER_DESCRIPTION, KeyedOnce
from vigil.observers.host_fleet.listing import (
    InvalidHostKind,
    NotPooled,
    UnknownHostKind,
    list_hosts,
)
from vigil.observers.host_fleet.model import Host
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.kind_options import KindOptions, parse_kind_options
from vigil.observers.migration import (
    MigrationStatus,
    RegistryMigrating,
    migration_status,
    read_progress,
)
from vigil.observers.model import (
    NAME_PATTERN,
    InvalidObserver,
    Status,
    parse_kinds,
    validate_config,
)
from vigil.observers.rebalance_requests import RebalanceRequests
from vigil.observers.registry import (
    MAX_PAGE,
    FleetFull,
    InvalidCursor,
    ObserverCommands,
    ObserverExists,
    ObserverNotFound,
    RegistryRef,
    VersionConflict,
)
from vigil.observers.registry.layout import registry_ref
from vigil.observers.vouched import as_seen
from vigil.settings import Environment
from vigil.settle import NotSettleable

NAME_RULE = NAME_PATTERN.pattern


class UnknownKind(Exception):
    def __init__(self, kind: str, kinds: Mapping[str, str]) -> None:
        super().__init__(f"kind {kind!r} is not one of {sorted(kinds)}")


class KindNotFound(UnknownKind):
    """A kind named in the path of a request about the kind itself (404, not a field's 422)."""


class NothingToRebalance(Exception):
    def __init__(self, kind: str, why: str = "is dedicated (one task per observer)") -> None:
        super().__init__(f"kind {kind!r} {why}: there is no load to even out")


@dataclass(frozen=True)
class ApiSettings:
    """The API function's environment, read and validated once."""

    table: RegistryRef
    idempotency_table: str
    kinds: dict[str, str]
    max_observers: int
    hosts_table: str = ""
    """Hosts to list and where rebalance requests go (empty: this fleet has no hosts table)."""
    placements: dict[str, KindOptions] = field(default_factory=dict)
    legacy_table: str = ""
    """A name-keyed registry the reconciler migrates from (``-c legacyRegistry=true``): the
    observers' routes wait (503) until it has copied it."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ApiSettings:
        """Raises :class:`~vigil.settings.SettingsError` naming the variable at fault."""
        read = Environment(environ)
        return cls(
            **read.gather(
                table=lambda: registry_ref(read),
                idempotency_table=lambda: read.text("VIGIL_IDEMPOTENCY_TABLE"),
                kinds=lambda: read.parsed("VIGIL_OBSERVER_KINDS", parse_kinds),
                max_observers=lambda: read.integer("VIGIL_MAX_OBSERVERS", minimum=1),
                hosts_table=lambda: read.text(HOSTS_TABLE_ENV, ""),
                placements=lambda: read.parsed(
                    PLACEMENTS_ENV, parse_kind_options, dict[str, KindOptions]()
                ),
                legacy_table=lambda: read.text(LEGACY_REGISTRY_TABLE_ENV, ""),
            )
        )


class CreateObserver(BaseModel):
    """The body of ``POST /observers``."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(pattern=NAME_RULE, description="Unique, [a-z0-9-]{1,63}")]
    kind: Annotated[str, Field(min_length=1, description="One of GET /kinds")]
    config: Annotated[
        dict[str, Any] | None, Field(description="The observer's configuration, at most 32 KB")
    ] = None

    @field_validator("config")
    @classmethod
    def _config_fits(cls, value: dict[str, Any] | None) -> dict[str, Any]:
        try:
            return validate_config(value)
        except InvalidObserver as error:
            raise ValueError(error.problem) from error


class Rebalance(BaseModel):
    """The body of ``POST /observers/rebalance``."""

    model_config = ConfigDict(extra="forbid")

    kind: Annotated[str, Field(min_length=1, description="A pooled kind (GET /kinds)")]
    max: Annotated[
        StrictInt,
        Field(ge=1, le=MAX_REBALANCE_MOVES, description="Observers moved at most (hand-overs)"),
    ] = DEFAULT_REBALANCE_MOVES


class SettleObserver(BaseModel):
    """The body of ``POST /observers/{name}/settle``: a person's word on the effect ``ctx.once``
    stopped the observer UNCERTAIN on (the words of ``vigil jobs settle
    --done|--done-rerun|--not-done``: :class:`~vigil.contract.journal.Verdict`)."""

    model_config = ConfigDict(extra="forbid")

    effect: Annotated[
        str,
        Field(pattern=f"^{EFFECT_NAME.pattern}$", description="The record's uncertain_effect"),
    ]
    outcome: Annotated[
        Verdict,
        Field(
            description="done: it happened (the next generation skips it); done_rerun: the "
            "same for an observer (its next generation always runs its code again; for a job or "
            "a task it also leaves the rest of the body to run); not_done: it did not (the next "
            "generation does it)"
        ),
    ]


class RebalanceAnswer(BaseModel):
    """The request as the reconciler will read it."""

    kind: str
    max: int
    requested_by: str
    requested_at_ms: int


class ErrorBody(BaseModel):
    """Every refusal: a stable code for programs and a message for people."""

    error: str
    message: str


class ObserverBody(BaseModel):
    """The observer representation (documentation of ``Observer.to_json``)."""

    name: str
    kind: str
    config: dict[str, Any]
    desired: str
    status: Status
    task_arn: str | None
    generation: int
    restarts: int
    consecutive_failures: int
    heartbeat_at: str | None = Field(
        description="Dedicated: its own last heartbeat; pooled: when its host last vouched for it"
    )
    checkpoint: dict[str, Any] | None = Field(
        None, description="What ctx.checkpoint last saved (a restart resumes from it)"
    )
    created_at: str
    updated_at: str
    last_exit: dict[str, Any] | None
    failure_reason: str | None
    status_reason: str | None = Field(
        None, description="Why it is not running yet (RunTask failed, waiting for a host)"
    )
    host: str | None = Field(None, description="Pooled: the host it runs on (null: dedicated)")
    task_definition: str | None = None
    uncertain_effect: str | None = Field(
        None,
        description="ctx.once stopped it UNCERTAIN on this effect: POST /observers/{name}/settle",
    )
    uncertain_reason: str | None = Field(None, description="Why: who began the effect, when")


def _responses(
    ok: HTTPStatus, *errors: tuple[HTTPStatus, str], model: type[BaseModel] = ObserverBody
) -> dict[int, OpenAPIResponse]:
    documented: dict[int, OpenAPIResponse] = {
        int(ok): {
            "description": ok.phrase,
            "content": {content_types.APPLICATION_JSON: {"model": model}},
        }
    }
    for status, description in errors:
        documented[int(status)] = {
            "description": description,
            "content": {content_types.APPLICATION_JSON: {"model": ErrorBody}},
        }
    return documented


_NOT_FOUND = (HTTPStatus.NOT_FOUND, ErrorCode.OBSERVER_NOT_FOUND)
_INVALID = (
    HTTPStatus.UNPROCESSABLE_ENTITY,
    "invalid_<field>, unknown_kind, idempotency_key_reused",
)


@dataclass(frozen=True)
class Services:
    registry: ObserverCommands
    kinds: Mapping[str, str]
    idempotency_store: BasePersistenceLayer
    hosts: HostStore | None = None
    placements: Mapping[str, KindOptions] = field(default_factory=dict)
    """Kind -> options (a kind not named is dedicated)."""
    rebalance: RebalanceRequests | None = None
    clock: Clock = system_clock
    migration: MigrationGate | None = None
    """An upgrade from a name-keyed registry: its state (``GET /migration``), and the wait of the
    observers' routes until the reconciler has copied it."""


class MigrationGate:
    """Whether the registry holds every observer yet (an upgrade's copy is done), read until it
    does, then known for the life of the process."""

    def __init__(self, client: Any, registry: RegistryRef, legacy_table: str) -> None:
        self._client = client
        self._registry = registry
        self.legacy_table = legacy_table
        self._open = False

    def check(self) -> None:
        """Raises RegistryMigrating until the reconciler has copied the old registry."""
        if self._open:
            return
        progress = read_progress(self._client, self._registry)
        if progress is None or progress.done_at is None:
            raise RegistryMigrating()
        self._open = True

    def status(self) -> MigrationStatus:
        return migration_status(self._client, self._registry, self.legacy_table)


_DOMAIN_ERRORS: dict[type[Exception], tuple[HTTPStatus, str]] = {
    ObserverExists: (HTTPStatus.CONFLICT, ErrorCode.OBSERVER_EXISTS),
    ObserverNotFound: (HTTPStatus.NOT_FOUND, ErrorCode.OBSERVER_NOT_FOUND),
    FleetFull: (HTTPStatus.TOO_MANY_REQUESTS, ErrorCode.FLEET_FULL),
    VersionConflict: (HTTPStatus.CONFLICT, ErrorCode.VERSION_CONFLICT),
    NotSettleable: (HTTPStatus.CONFLICT, ErrorCode.NOT_SETTLEABLE),
    InvalidCursor: (HTTPStatus.BAD_REQUEST, invalid("cursor")),
    KindNotFound: (HTTPStatus.NOT_FOUND, ErrorCode.KIND_NOT_FOUND),
    NothingToRebalance: (HTTPStatus.CONFLICT, ErrorCode.NOTHING_TO_REBALANCE),
    UnknownKind: (HTTPStatus.UNPROCESSABLE_ENTITY, ErrorCode.UNKNOWN_KIND),
    InvalidHostKind: (HTTPStatus.UNPROCESSABLE_ENTITY, invalid("kind")),
    UnknownHostKind: (HTTPStatus.UNPROCESSABLE_ENTITY, ErrorCode.UNKNOWN_KIND),
    NotPooled: (HTTPStatus.UNPROCESSABLE_ENTITY, ErrorCode.NOT_POOLED),
    RegistryMigrating: (HTTPStatus.SERVICE_UNAVAILABLE, ErrorCode.REGISTRY_MIGRATING),
    **idempotent_requests.ERRORS,
}
_MESSAGES = idempotent_requests.MESSAGES


def build_app(services: Services) -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True)
    registry = services.registry
    gate = services.migration.check if services.migration is not None else lambda: None

    def create(request: CreateObserver) -> dict[str, Any]:
        if request.kind not in services.kinds:
            raise UnknownKind(request.kind, services.kinds)
        observer = registry.create(request.name, request.kind, request.config or {})
        _count(telemetry.ObserverMetric.CREATED, request.kind)
        return observer.to_json()

    create_once = KeyedOnce(
        app,
        lambda request: create(CreateObserver.model_validate(request)),
        services.idempotency_store,
    )

    @app.get("/kinds", summary="The observer kinds this fleet can run")
    def list_kinds() -> dict[str, Any]:
        return {"kinds": sorted(services.kinds)}

    @app.post(
        "/observers",
        summary="Register an observer; the reconciler starts it",
        responses=_responses(
            HTTPStatus.CREATED,
            (HTTPStatus.BAD_REQUEST, "invalid_json"),
            _INVALID,
            (HTTPStatus.CONFLICT, "observer_exists, request_in_progress"),
            (HTTPStatus.TOO_MANY_REQUESTS, "fleet_full"),
        ),
    )
    def post_observer(
        request: Annotated[CreateObserver, Body(embed=False)],
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                max_length=255,
                description=HEADER_DESCRIPTION,
            ),
        ] = None,
    ) -> Response[dict[str, Any]]:
        if request.kind not in services.kinds:  # refused before the idempotency store is touched
            raise UnknownKind(request.kind, services.kinds)
        gate()
        if idempotency_key:
            body = create_once(idempotency_key, request.model_dump())
        else:
            body = create(request)
        return Response(HTTPStatus.CREATED, content_types.APPLICATION_JSON, body)

    def host_of(host_id: str) -> Host | None:
        """A pooled observer's host, for the heartbeat it vouched (none: no hosts table)."""
        return services.hosts.get(host_id) if services.hosts is not None else None

    @app.get("/observers", summary="Observers in name order, one page at a time")
    def get_observers(
        status: Annotated[Status | None, Query(description="Only observers in this status")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = MAX_PAGE,
        cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
    ) -> dict[str, Any]:
        gate()
        page = registry.list_page(status=status, limit=limit, cursor=cursor)
        return {
            "observers": [o.to_json() for o in as_seen(page.observers, host_of)],
            "next_cursor": page.cursor,
        }

    @app.get(
        "/observers/<name>", summary="One observer", responses=_responses(HTTPStatus.OK, _NOT_FOUND)
    )
    def get_observer(name: Annotated[str, Path(pattern=NAME_RULE)]) -> dict[str, Any]:
        gate()
        (observer,) = as_seen([registry.get(name)], host_of)
        return observer.to_json()

    @app.delete(
        "/observers/<name>",
        summary="Stop an observer (its record stays)",
        responses=_responses(HTTPStatus.ACCEPTED, _NOT_FOUND),
    )
    def delete_observer(
        name: Annotated[str, Path(pattern=NAME_RULE)],
    ) -> Response[dict[str, Any]]:
        gate()
        body = registry.request_stop(name).to_json()
        return Response(HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, body)

    @app.post(
        "/observers/<name>/restart",
        summary="Replace an observer's task with a fresh one",
        responses=_responses(
            HTTPStatus.ACCEPTED, _NOT_FOUND, (HTTPStatus.TOO_MANY_REQUESTS, "fleet_full")
        ),
    )
    def restart_observer(
        name: Annotated[str, Path(pattern=NAME_RULE)],
    ) -> Response[dict[str, Any]]:
        gate()
        body = registry.request_restart(name).to_json()
        return Response(HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, body)

    @app.post(
        "/observers/<name>/settle",
        summary="Settle the effect ctx.once stopped an observer UNCERTAIN on, and restart it",
        responses=_responses(
            HTTPStatus.ACCEPTED,
            _NOT_FOUND,
            (HTTPStatus.CONFLICT, "not_settleable, version_conflict"),
            (HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_effect, invalid_outcome, invalid_body"),
            (HTTPStatus.TOO_MANY_REQUESTS, "fleet_full"),
        ),
    )
    def settle_observer(
        name: Annotated[str, Path(pattern=NAME_RULE)],
        request: Annotated[SettleObserver, Body(embed=False)],
    ) -> Response[dict[str, Any]]:
        gate()
        observer = registry.request_settle(name, request.effect, verdict=request.outcome)
        _count(telemetry.ObserverMetric.SETTLED, observer.kind)
        telemetry.logger().info(
            "settled",
            extra={"observer": name, "effect": request.effect, "outcome": request.outcome.value},
        )
        body = observer.to_json()
        return Response(HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, body)

    @app.post(
        "/observers/rebalance",
        summary="Even a pooled kind's load over its hosts, a bounded number of moves at a time",
        responses=_responses(
            HTTPStatus.ACCEPTED,
            (HTTPStatus.NOT_FOUND, "kind_not_found"),
            (HTTPStatus.CONFLICT, "nothing_to_rebalance (a dedicated kind)"),
            (HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_kind, invalid_max"),
            model=RebalanceAnswer,
        ),
    )
    def post_rebalance(
        request: Annotated[Rebalance, Body(embed=False)],
    ) -> Response[dict[str, Any]]:
        if request.kind not in services.kinds:
            raise KindNotFound(request.kind, services.kinds)
        options = services.placements.get(request.kind)
        if options is None or not options.pooled:
            raise NothingToRebalance(request.kind)
        if services.rebalance is None:
            raise NothingToRebalance(request.kind, "has no hosts table in this deployment")
        caller = caller_of(app.current_event.request_context)
        done = services.rebalance.request(request.kind, request.max, caller, services.clock())
        return Response(HTTPStatus.ACCEPTED, content_types.APPLICATION_JSON, done.to_json())

    @app.get("/hosts", summary="Pooled hosts: slots used and free, heartbeat age, status")
    def get_hosts(
        kind: Annotated[
            str | None,
            Query(
                max_length=200,
                description="Only hosts of this pooled kind (one that is not is refused, "
                "naming the fleet's kinds)",
            ),
        ] = None,
    ) -> dict[str, Any]:
        found = list(services.hosts.scan(services.clock())) if services.hosts else []
        return {
            "hosts": list_hosts(found, services.placements, services.kinds, kind, services.clock())
        }

    @app.get(
        "/migration",
        summary="An upgrade from a registry keyed by name: copied yet, and what still writes it",
    )
    def get_migration() -> dict[str, Any]:
        if services.migration is None:
            return migration_status(registry.client, registry.ref, None).to_json()
        return services.migration.status().to_json()

    @app.get("/openapi", include_in_schema=False)
    def openapi() -> Response[str]:
        return Response(
            status_code=HTTPStatus.OK,
            content_type=content_types.APPLICATION_JSON,
            body=openapi_json(app),
        )

    def unsupported(error: RequestUnsupportedContentType) -> Response[str]:
        return error_body(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            "send application/json",
        )

    app.exception_handler(RequestValidationError)(validation_response)
    app.exception_handler(RequestUnsupportedContentType)(unsupported)
    app.exception_handler(list(_DOMAIN_ERRORS))(domain_error_response(_DOMAIN_ERRORS, _MESSAGES))
    answer_unknown_routes(app)

    return app


def openapi_json(app: APIGatewayRestResolver) -> str:
    """The published schema; IAM (SigV4) authorization is declared for every operation."""
    return app.get_openapi_json_schema(
        title="Vigil observers",
        version=__version__,
        description="Register, list, stop and restart long-running observers.",
        security_schemes={
            "sigv4": APIKey(name="Authorization", in_=APIKeyIn.header)  # type: ignore[call-arg]
        },
        security=[{"sigv4": []}],
    )


def _count(metric: telemetry.ObserverMetric, kind: str) -> None:
    telemetry.count_one(metric, kind=kind)
