"""A DynamoDB endpoint on a real local TCP socket that can stop answering: a partition where calls
hang instead of failing. botocore talks to it as to DynamoDB (HTTP/1.1, JSON 1.0), so what a test
measures is botocore's own behaviour (its timeouts, its retries) with the client settings the code
under test builds.

While ``hang`` is False each request gets the answer ``answer(operation, request)`` returns; once
it is True the server accepts every connection and reads every request, and never answers (the
socket stays open until :meth:`close`). ``connections`` counts TCP connections accepted, so a test
can count botocore's attempts against it (each attempt after a read timeout opens a new one).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

Answer = Callable[[str, dict[str, Any]], dict[str, Any]]
"""(operation, the request's JSON) -> the answer's JSON."""


class HangingDynamoDB:
    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self.hang = False
        self.connections = 0
        self.requests: list[tuple[str, dict[str, Any]]] = []
        """Requests answered, in order."""
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, name="hanging-dynamodb", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close the listener and every connection (a client blocked on one sees it end)."""
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        reader = connection.makefile("rb")
        with contextlib.suppress(OSError, ValueError):
            while True:
                request = _read_request(reader)
                if request is None:
                    return
                if self.hang:
                    continue  # read, never answered: the client waits for its read timeout
                operation, body = request
                self.requests.append((operation, body))
                payload = json.dumps(self._answer(operation, body)).encode()
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\n"
                    b"Content-Type: application/x-amz-json-1.0\r\n"
                    b"x-amzn-RequestId: hanging-dynamodb\r\n"
                    + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )


def _read_request(reader: Any) -> tuple[str, dict[str, Any]] | None:
    """One HTTP request: (the X-Amz-Target's operation, its JSON body); None once closed."""
    line = reader.readline()
    if not line:
        return None
    headers: dict[str, str] = {}
    while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = reader.read(int(headers.get("content-length", "0")))
    operation = headers.get("x-amz-target", "").rpartition(".")[2]
    return operation, json.loads(body or b"{}")
