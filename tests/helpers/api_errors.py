"""Checks every management API's refusals against the one documented set of error codes
(``vigil.contract.api_errors``), route by route, with the fields each route's OpenAPI declares."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from vigil.contract.api_errors import documented

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Refusal:
    """One request a route must refuse (4xx); ``path`` is the concrete one sent."""

    method: str
    route: str
    """As the OpenAPI names it: ``/tasks/{task}/{task_id}``."""
    path: str
    body: Any = None
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None


def _schema(app: APIGatewayRestResolver) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(app.get_openapi_json_schema())
    return document


def routes_with_input(app: APIGatewayRestResolver) -> set[tuple[str, str]]:
    """(METHOD, route) of every route that takes a parameter or a body: those can refuse."""
    found = set()
    for route, operations in _schema(app)["paths"].items():
        for method, operation in operations.items():
            if method in METHODS and (operation.get("parameters") or "requestBody" in operation):
                found.add((method.upper(), route))
    return found


def fields_of(app: APIGatewayRestResolver, method: str, route: str) -> set[str]:
    """The parameters (path, query, header) and body fields the route declares."""
    document = _schema(app)
    operation = document["paths"][route][method.lower()]
    fields = {parameter["name"] for parameter in operation.get("parameters", [])}
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    schema = body.get("schema", {})
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return fields | set(schema.get("properties", {}))


def check_refusals(
    app: APIGatewayRestResolver,
    send: Callable[[Refusal], tuple[int, Any]],
    refusals: Iterable[Refusal],
) -> list[str]:
    """Sends each refusal; every route with input is covered, and every answer is a 4xx whose
    code is documented for its route. Returns the codes seen (for the caller's own checks)."""
    refusals = list(refusals)
    assert {(r.method, r.route) for r in refusals} == routes_with_input(app)
    seen = []
    for refusal in refusals:
        status, answer = send(refusal)
        assert 400 <= status < 500, (refusal, status, answer)
        code = answer["error"]
        fields = fields_of(app, refusal.method, refusal.route)
        assert documented(code, fields), (refusal.method, refusal.route, code, sorted(fields))
        assert answer["message"], refusal
        seen.append(code)
    return seen
