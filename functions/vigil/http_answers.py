"""How every Vigil management API answers a refusal: ``{"error": code, "message": ...}``.

Shared by the observers, jobs-control and tasks APIs, so a client (the ``vigil`` CLI) reads one
shape, and a domain error becomes its HTTP answer through one table per API; the codes are one
set, named by one scheme (``vigil.contract.api_errors``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from vigil.contract.api_errors import INVALID_FIELD, ErrorCode, invalid

ErrorTable = Mapping[type[Exception], tuple[HTTPStatus, str]]


def error_body(status: HTTPStatus, code: str, message: str, **extra: Any) -> Response[str]:
    """``code``: an :class:`ErrorCode` or ``invalid(field)`` (``vigil.contract.api_errors``)."""
    return Response(
        status_code=int(status),
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps({"error": code, "message": message, **extra}),
    )


def domain_error_response(
    table: ErrorTable,
    messages: Mapping[str, str] | None = None,
    fields: Mapping[str, str] | None = None,
) -> Callable[[Exception], Response[str]]:
    """The exception handler for ``table``'s classes (looked up along the MRO). A class whose
    code is ``INVALID_FIELD`` carries the ``field`` it refuses: its code is ``invalid_<field>``,
    the field named as the API's request names it (``fields`` renames the library's own
    names, e.g. ``delay`` -> ``delay_seconds``), so it is the code that field's validation
    gives too."""

    def answer(error: Exception) -> Response[str]:
        for cls in type(error).__mro__:
            if cls in table:
                status, code = table[cls]
                if code == INVALID_FIELD:
                    field = str(getattr(error, "field", "request"))
                    code = invalid((fields or {}).get(field, field))
                return error_body(status, code, (messages or {}).get(code, str(error)))
        raise error  # pragma: no cover - only registered classes reach here

    return answer


def validation_response(error: RequestValidationError) -> Response[str]:
    """One error per request: the first problem decides the code, all of them are listed."""
    problems = list(error.errors())
    if any(p.get("type") == "json_invalid" for p in problems):
        detail = problems[0].get("ctx", {}).get("error", "")
        return error_body(
            HTTPStatus.BAD_REQUEST, ErrorCode.INVALID_JSON, f"body is not JSON: {detail}"
        )
    details = [{"field": _field(p), "problem": str(p.get("msg", ""))} for p in problems]
    first = details[0]["field"] if details else "request"
    # A field the route does not take is not one of its fields: the body as a whole is wrong.
    whole = first == "body" or (problems and problems[0].get("type") == "extra_forbidden")
    code = ErrorCode.INVALID_BODY if whole else invalid(first)
    message = "; ".join(f"{d['field']}: {d['problem']}" for d in details)
    return error_body(HTTPStatus.UNPROCESSABLE_ENTITY, code, message, details=details)


def _field(problem: Mapping[str, Any]) -> str:
    """``("body", "config", "x")`` -> ``config``; ``("body",)`` -> ``body``."""
    location = [str(part) for part in problem.get("loc", ()) if not isinstance(part, int)]
    if len(location) > 1 and location[1] in ("request",):
        location = [location[0], *location[2:]]
    return location[1] if len(location) > 1 else (location[0] if location else "request")


def caller_of(request_context: Any) -> str:
    """Who signed the request (IAM): recorded on what it changes."""
    identity = request_context.identity
    return str(identity.user_arn or identity.caller or "anonymous")


def answer_unknown_routes(app: APIGatewayRestResolver) -> None:
    """A request for no route gets the same error shape as every refusal (404 ``no_such_route``)."""

    @app.not_found
    def no_route(error: Exception) -> Response[str]:
        event = app.current_event
        return error_body(
            HTTPStatus.NOT_FOUND,
            ErrorCode.NO_SUCH_ROUTE,
            f"no route for {event.http_method} {event.path}",
        )
