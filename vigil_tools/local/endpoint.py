"""The local endpoint: moto's server, one request at a time, and the management API beside it.

moto applies a request non-atomically and its server serves requests on threads (NOTES.md); AWS
applies each request atomically. One lock around moto's request handling gives the local endpoint
AWS's per-request atomicity. Requests to ``/console`` are the console's pages
(:mod:`vigil_tools.local.console`), outside the lock too. Requests under :data:`API_PREFIX` are the management API (API
Gateway's part): each becomes the REST proxy event the deployed API function receives, and runs
outside that lock, since the function itself calls the endpoint. Requests under
:data:`~vigil_tools.local.task_metadata.PREFIX` are ECS's task metadata endpoint v4 (each task's
container reads its own task ARN there).
"""

from __future__ import annotations

import base64
import errno
import json
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

from vigil_tools.api_client import rest_event
from vigil_tools.local.console import LocalConsole
from vigil_tools.local.task_metadata import PREFIX as METADATA_PREFIX
from vigil_tools.local.task_metadata import TaskMetadata

API_PREFIX = "/vigil-api"
"""The management API's stage URL is ``http://HOST:PORT/vigil-api``."""
HOST = "127.0.0.1"
CONSOLE_PATH = "/console"
"""The console's pages (``vigil.console.controls.LOCAL_PATH``), on the loopback only."""

ApiHandler = Callable[[dict[str, Any]], dict[str, Any]]
"""A REST proxy event in, the function's proxy answer out."""


class PortInUse(OSError):
    pass


class LocalEndpoint:
    """moto's WSGI application, serialized, plus the management API, on one port."""

    def __init__(self, port: int, api: ApiHandler | None = None) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self._moto = DomainDispatcherApplication(create_backend_app)
        self._lock = threading.Lock()
        self.api = api
        self.console: LocalConsole | None = None
        """The console (``vigil_tools.local.console.LocalConsole``) once the stack is deployed."""
        _check_free(port)
        self._server: BaseWSGIServer = make_server(HOST, port, self._app, threaded=True)
        self.port = int(self._server.server_address[1])
        self.task_metadata = TaskMetadata(self.url)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="local-endpoint", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def api_url(self) -> str:
        return self.url + API_PREFIX

    def exclusive(self) -> threading.Lock:
        """Held, no request reaches moto: for changing moto's state in-process between them."""
        return self._lock

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
        self._server.server_close()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path == API_PREFIX or path.startswith(API_PREFIX + "/"):
            return self._api(Request(environ))(environ, start_response)
        if path == CONSOLE_PATH:
            if self.console is None:
                starting = _json(503, {"error": "starting", "message": "not deployed yet"})
                return starting(environ, start_response)
            return self.console.answer(Request(environ))(environ, start_response)
        if path.startswith(METADATA_PREFIX + "/"):
            document = self.task_metadata.answer(path)
            answer = (
                _json(404, {"error": "no such task"}) if document is None else _json(200, document)
            )
            return answer(environ, start_response)
        with self._lock:
            # moto's answer is read whole inside the lock: nothing of it runs after.
            return list(self._moto(environ, start_response))

    def _api(self, request: Request) -> Response:
        if self.api is None:
            return _json(503, {"error": "starting", "message": "the stack is not deployed yet"})
        event = rest_event(
            request.method,
            request.path[len(API_PREFIX) :] or "/",
            query=dict(request.args),
            headers=dict(request.headers),
            body=request.get_data() or None,
        )
        try:
            answer = self.api(event)
        except Exception as error:  # the function failed: API Gateway answers 502
            return _json(502, {"error": "internal", "message": f"{type(error).__name__}: {error}"})
        body = answer.get("body") or ""
        return Response(
            base64.b64decode(body) if answer.get("isBase64Encoded") else body,
            status=int(answer.get("statusCode", 200)),
            headers=dict(answer.get("headers") or {}),
        )


def _check_free(port: int) -> None:
    """Refuse a port in use with our message (werkzeug would print its own and exit)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise PortInUse(
                    f"port {port} on {HOST} is in use (another `vigil local up`?): "
                    "stop it or pick another with --port"
                ) from None
            raise


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")
