"""``reference/api.md``: the management API from the OpenAPI schemas of its three resolvers
(observers, jobs control, tasks), built with services that are never called: registering routes
touches no AWS."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from docsgen.markdown import anchor, code, heading, page, table

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Resolver:
    title: str
    function: str
    build: Callable[[], APIGatewayRestResolver]


def _observers() -> APIGatewayRestResolver:
    from vigil.observers.api import Services, build_app

    unused: Any = None
    return build_app(Services(registry=unused, kinds={}, idempotency_store=unused))


def _jobs_control() -> APIGatewayRestResolver:
    from vigil.jobs.control_api import ControlServices, build_control_app

    unused: Any = None
    return build_control_app(ControlServices(jobs={}, control=unused, runs=unused, invoke=unused))


def _tasks() -> APIGatewayRestResolver:
    from vigil.tasks.api import TasksServices, build_tasks_app

    unused: Any = None
    return build_tasks_app(TasksServices(client=unused))


RESOLVERS = (
    Resolver("Observers", "handlers.observers_api.handler", _observers),
    Resolver("Jobs control", "handlers.jobs_control.handler", _jobs_control),
    Resolver("Tasks", "handlers.tasks_api.handler", _tasks),
)


def schema(resolver: Resolver) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(resolver.build().get_openapi_json_schema()))


def render() -> str:
    return page(
        "Management API",
        "One REST API (API Gateway, IAM authorization: every request is signed with SigV4 by a "
        "principal the stack's `operators` context allows), served by three functions. "
        "`vigil` calls it; its URL is the stack's `JobsApiEndpoint` output. Generated from the "
        "OpenAPI schema of each function's Powertools resolver.",
        *(_resolver(resolver, schema(resolver)) for resolver in RESOLVERS),
    )


def operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    """``(METHOD, path)`` of every operation, sorted."""
    return sorted(
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS
    )


def _resolver(resolver: Resolver, document: dict[str, Any]) -> str:
    parts = [f"## {resolver.title}\n\nServed by {code(resolver.function)}.\n"]
    for method, path in operations(document):
        parts.append(_operation(method, path, document["paths"][path][method.lower()]))
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        parts.append(f"### {resolver.title}: schemas\n")
        parts += [_schema(name, schemas[name]) for name in sorted(schemas)]
    return "\n".join(parts)


def _operation(method: str, path: str, operation: dict[str, Any]) -> str:
    lines = [heading(3, code(f"{method} {path}"), anchor(method, path))]
    for text in (operation.get("summary"), operation.get("description")):
        if text:
            lines.append(f"{text.strip()}\n")
    parameters = operation.get("parameters", [])
    if parameters:
        lines.append(
            table(
                ("Parameter", "In", "Required", "Type", "Meaning"),
                [
                    (
                        code(param["name"]),
                        param["in"],
                        "yes" if param.get("required") else "no",
                        _type(param.get("schema", {})),
                        param.get("description", "")
                        or param.get("schema", {}).get("description", ""),
                    )
                    for param in parameters
                ],
            )
        )
    body = operation.get("requestBody")
    if body:
        content = body.get("content", {})
        kinds = ", ".join(
            f"{media}: {_type(content[media].get('schema', {}))}" for media in sorted(content)
        )
        required = "required" if body.get("required") else "optional"
        lines.append(f"**Body** ({required}): {kinds}\n")
    responses = operation.get("responses", {})
    lines.append(
        table(
            ("Response", "Meaning", "Body"),
            [
                (
                    code(status),
                    responses[status].get("description", ""),
                    ", ".join(
                        _type(media.get("schema", {}))
                        for media in responses[status].get("content", {}).values()
                    ),
                )
                for status in sorted(responses)
            ],
        )
    )
    return "\n".join(lines)


def _schema(name: str, definition: dict[str, Any]) -> str:
    properties = definition.get("properties", {})
    required = set(definition.get("required", []))
    text = f"#### {name}\n\n"
    if definition.get("description"):
        text += f"{definition['description'].strip()}\n\n"
    if not properties:
        return text + f"{_type(definition)}\n"
    return text + table(
        ("Field", "Type", "Required", "Meaning"),
        [
            (
                code(field),
                _type(spec),
                "yes" if field in required else "no",
                spec.get("description", ""),
            )
            for field, spec in properties.items()
        ],
    )


def _type(spec: dict[str, Any]) -> str:
    """A JSON schema in a few words: a type, a ``$ref``'s name, unions, constraints."""
    if "$ref" in spec:
        return f"`{spec['$ref'].rsplit('/', 1)[-1]}`"
    for union in ("anyOf", "oneOf"):
        if union in spec:
            return " or ".join(_type(option) for option in spec[union])
    kind = str(spec.get("type", "any"))
    if kind == "array":
        kind = f"array of {_type(spec.get('items', {}))}"
    if "enum" in spec:
        kind += " (" + ", ".join(code(str(value)) for value in spec["enum"]) + ")"
    constraints = [
        f"{key} {code(str(spec[key]))}"
        for key in ("minimum", "maximum", "minLength", "maxLength", "pattern")
        if key in spec
    ]
    return kind + (f", {', '.join(constraints)}" if constraints else "")
