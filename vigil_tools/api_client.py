"""The management API's client: its routes as methods (:class:`ObserversClient`), the transports
that carry a request (signed HTTPS, or the API's handler in this process) and the errors.

The ``vigil`` command (:mod:`vigil_tools.cli`) is one user; the commands it loads, the local
endpoint, the demo and the testing kit are the others: here, none of them imports the command
line to reach the API, and the command line can load them without a circle.
"""

from __future__ import annotations

import base64
import builtins
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vigil_tools.lambda_context import LambdaContext

_REGION_IN_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com")


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


Transport = Callable[[HttpRequest], HttpResponse]


class Unreachable(Exception):
    """The API could not be asked: no endpoint, no credentials, or the network failed."""


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class SigV4Transport:
    """HTTPS to the API's stage URL, signed for IAM authorization."""

    def __init__(
        self,
        endpoint: str,
        *,
        region: str | None = None,
        credentials: Any = None,
        timeout: float = 30.0,
    ) -> None:
        self._endpoint = endpoint.rstrip("/")
        found = _REGION_IN_HOST.search(urllib.parse.urlsplit(self._endpoint).netloc)
        self._region = (
            region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or (found.group(1) if found else None)
        )
        self._credentials = credentials
        self._timeout = timeout

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        if not self._region:
            raise Unreachable("cannot tell the API's region: pass --region or set AWS_REGION")
        credentials = self._credentials or _default_credentials()
        url = self._endpoint + request.path
        if request.query:
            url += "?" + urllib.parse.urlencode(request.query)
        signed = AWSRequest(
            method=request.method, url=url, data=request.body, headers=dict(request.headers)
        )
        SigV4Auth(credentials, "execute-api", self._region).add_auth(signed)
        prepared = urllib.request.Request(
            url, data=request.body, headers=dict(signed.headers.items()), method=request.method
        )
        try:
            with urllib.request.urlopen(prepared, timeout=self._timeout) as answer:
                return HttpResponse(answer.status, answer.read())
        except urllib.error.HTTPError as refused:
            return HttpResponse(refused.code, refused.read())
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            raise Unreachable(f"cannot reach {self._endpoint}: {error}") from error


def _default_credentials() -> Any:
    import boto3

    credentials = boto3.Session().get_credentials()
    if credentials is None:
        raise Unreachable("no AWS credentials found (profile, environment or role)")
    return credentials.get_frozen_credentials()


def rest_event(
    method: str,
    path: str,
    *,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    body: bytes | str | None = None,
    caller_arn: str = "arn:aws:iam::123456789012:user/operator",
) -> dict[str, Any]:
    """An API Gateway REST proxy event as the ``{proxy+}`` integration delivers it."""
    text = body.decode() if isinstance(body, bytes) else body
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": dict(headers or {}),
        "multiValueHeaders": {k: [v] for k, v in (headers or {}).items()},
        "queryStringParameters": dict(query) if query else None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": "local-request",
            "accountId": "123456789012",
            "identity": {"userArn": caller_arn, "caller": caller_arn.rsplit("/", 1)[-1]},
        },
        "body": text,
        "isBase64Encoded": False,
    }


class InProcessTransport:
    """Calls the API's Lambda handler in this process: for tests and the local emulator."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], dict[str, Any]]) -> None:
        self._handler = handler

    def __call__(self, request: HttpRequest) -> HttpResponse:
        event = rest_event(
            request.method,
            request.path,
            query=request.query,
            headers=request.headers,
            body=request.body,
        )
        result = self._handler(event, LambdaContext())
        body = result.get("body") or ""
        raw = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        return HttpResponse(int(result["statusCode"]), raw)


class ObserversClient:
    """The API's routes as methods; any non-2xx answer becomes ``ApiError``."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def kinds(self) -> list[str]:
        return list(self._call("GET", "/kinds")["kinds"])

    def create(
        self, name: str, kind: str, config: dict[str, Any], idempotency_key: str | None = None
    ) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        body = {"name": name, "kind": kind, "config": config}
        return dict(self._call("POST", "/observers", body=body, headers=headers))

    def list(self, status: str | None = None) -> list[dict[str, Any]]:
        observers: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = {k: v for k, v in (("status", status), ("cursor", cursor)) if v}
            page = self._call("GET", "/observers", query=query)
            observers += page["observers"]
            cursor = page.get("next_cursor")
            if not cursor:
                return observers

    def get(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/observers/{_segment(name)}"))

    def hosts(self, kind: str | None = None) -> builtins.list[dict[str, Any]]:
        return list(self._call("GET", "/hosts", query={"kind": kind} if kind else {})["hosts"])

    def stop(self, name: str) -> dict[str, Any]:
        return dict(self._call("DELETE", f"/observers/{_segment(name)}"))

    def restart(self, name: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/observers/{_segment(name)}/restart"))

    def settle(self, name: str, effect: str, *, done: bool) -> dict[str, Any]:
        body = {"effect": effect, "outcome": "done" if done else "not_done"}
        return dict(self._call("POST", f"/observers/{_segment(name)}/settle", body=body))

    def migration(self) -> dict[str, Any]:
        """Where an upgrade from a registry keyed by name stands (``GET /migration``)."""
        return dict(self._call("GET", "/migration"))

    def rebalance(self, kind: str, max_moves: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": kind}
        if max_moves is not None:
            body["max"] = max_moves
        return dict(self._call("POST", "/observers/rebalance", body=body))

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        all_headers = {"Accept": "application/json", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        answer = self._transport(HttpRequest(method, path, query or {}, all_headers, data))
        try:
            payload = answer.json()
        except ValueError:
            payload = None
        if 200 <= answer.status < 300:
            return payload
        if isinstance(payload, dict) and "error" in payload:
            raise ApiError(answer.status, str(payload["error"]), str(payload.get("message", "")))
        text = answer.body.decode(errors="replace")[:500]
        raise ApiError(answer.status, "http_error", text or "no body")

    call = _call
    """Any route of the API (the jobs commands use it)."""


def _segment(name: str) -> str:
    return urllib.parse.quote(name, safe="")
