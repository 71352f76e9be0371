"""``Idempotency-Key`` for the management APIs' POSTs, through Powertools' idempotency utility.

The same key from the same caller with the same body replays the first answer (a client that
retried after a timeout does not create a second observer or start a second run); with another
body it is refused (422). Keys are per caller: two operators cannot collide.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.idempotency import (
    BasePersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

from vigil.contract.api_errors import ErrorCode
from vigil.http_answers import caller_of

TTL_SECONDS = 24 * 3600
KEY_REUSED = (HTTPStatus.UNPROCESSABLE_ENTITY, ErrorCode.IDEMPOTENCY_KEY_REUSED)
"""The answer to a key reused with another body, on every API (the tasks API's own check too)."""
ERRORS: dict[type[Exception], tuple[HTTPStatus, str]] = {
    IdempotencyValidationError: KEY_REUSED,
    IdempotencyAlreadyInProgressError: (HTTPStatus.CONFLICT, ErrorCode.REQUEST_IN_PROGRESS),
}
MESSAGES: dict[str, str] = {
    ErrorCode.IDEMPOTENCY_KEY_REUSED: "this Idempotency-Key was already used with a different body",
    ErrorCode.REQUEST_IN_PROGRESS: "a request with this Idempotency-Key is still in progress; retry",
}
HEADER_DESCRIPTION = "Same key and body: the first answer again"


class KeyedOnce:
    """``handle(request)`` at most once per (caller, key, request) within the TTL."""

    def __init__(
        self,
        app: APIGatewayRestResolver,
        handle: Callable[[dict[str, Any]], dict[str, Any]],
        store: BasePersistenceLayer,
    ) -> None:
        self._app = app
        self._config = IdempotencyConfig(
            event_key_jmespath="[caller, key]",
            payload_validation_jmespath="request",
            expires_after_seconds=TTL_SECONDS,
        )

        def keyed(keyed: dict[str, Any]) -> dict[str, Any]:
            return handle(keyed["request"])

        self._once = idempotent_function(
            keyed, data_keyword_argument="keyed", persistence_store=store, config=self._config
        )

    def __call__(self, key: str, request: dict[str, Any]) -> dict[str, Any]:
        if self._app.lambda_context is not None:
            self._config.register_lambda_context(self._app.lambda_context)
        keyed = {
            "caller": caller_of(self._app.current_event.request_context),
            "key": key,
            "request": request,
        }
        answer: dict[str, Any] = self._once(keyed=keyed)
        return answer
