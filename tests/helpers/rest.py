"""One JSON request to a management API's app in this process, as API Gateway's proxy integration
delivers it (signed by the default operator): what the jobs-control and tasks tests send."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from vigil_tools.api_client import rest_event
from vigil_tools.lambda_context import LambdaContext


def send_json(
    app: APIGatewayRestResolver,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """The answer's status and JSON body (None when empty); ``raw`` is sent as it is, instead of
    ``body`` as JSON (to send what is not JSON)."""
    event = rest_event(
        method,
        path,
        query=query or None,
        headers={"Content-Type": "application/json", **(headers or {})},
        body=raw if raw is not None else (json.dumps(body) if body is not None else None),
    )
    answer = app.resolve(event, LambdaContext())
    return int(answer["statusCode"]), json.loads(answer["body"] or "null")
