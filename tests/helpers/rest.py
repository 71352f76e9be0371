"""One JSON request to a management API in this process, as API Gateway's proxy integration
delivers it: what the jobs-control, tasks and observers API tests send."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from vigil_tools.api_client import rest_event
from vigil_tools.lambda_context import LambdaContext

Handle = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
"""What answers the event: an app's ``resolve``, or a Lambda handler."""


def send_json(
    handle: Handle,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    caller: str | None = None,
) -> tuple[int, Any]:
    """The answer's status and JSON body (None when empty); ``raw`` is sent as it is, instead of
    ``body`` as JSON (to send what is not JSON); ``caller`` signs it (the default operator)."""
    event = rest_event(
        method,
        path,
        query=query or None,
        headers={"Content-Type": "application/json", **(headers or {})},
        body=raw if raw is not None else (json.dumps(body) if body is not None else None),
        **({"caller_arn": caller} if caller is not None else {}),
    )
    answer = handle(event, LambdaContext())
    return int(answer["statusCode"]), json.loads(answer["body"] or "null")
