"""Invoke deployed functions in-process, as Lambda would (moto cannot run them without Docker).

Each invocation reads the function's handler, timeout and environment from the emulator's Lambda
API, so it runs with exactly the configuration the template deployed. Asynchronous invocations
follow the function's EventInvokeConfig: retries, then the on-failure destination record.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import json
import logging
import os
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vigil.clock import iso
from vigil_tools.lambda_context import LambdaContext
from vigil_tools.project import find_project

LAMBDA_RETRY_DELAYS = (timedelta(minutes=1), timedelta(minutes=2))
"""Lambda waits about one, then two minutes between asynchronous attempts."""
KILLED = "Runtime.ExitError"
"""What Lambda reports for an invocation whose process died (killed, out of memory)."""


class InvocationKilled(BaseException):
    """The function's process died in the middle of an invocation: nothing after that point
    runs and nothing more reaches AWS (an ``except Exception`` cannot stop it, as nothing stops
    a SIGKILL). Lambda reports it (:data:`KILLED`) and retries an asynchronous invocation."""


class _Invocations(threading.local):
    """Per thread: whether it is inside an invocation, and why that invocation was killed."""

    inside: bool = False
    killed: str | None = None


_current = _Invocations()


def in_invocation() -> bool:
    """Whether the calling thread runs a function's invocation now."""
    return _current.inside


def killed_invocation() -> str | None:
    """Why the calling thread's invocation was killed (its process is dead), else None."""
    return _current.killed if _current.inside else None


def kill_invocation(why: str) -> InvocationKilled:
    """Kill the calling thread's invocation: what to raise (every later request of it fails)."""
    _current.killed = why
    return InvocationKilled(why)


@dataclass
class Invocation:
    ok: bool
    payload: Any = None
    error_type: str | None = None
    error_message: str | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    """What the handler raised, with its traceback (the testing kit shows the author's frames)."""


@dataclass
class AsyncInvocation:
    function: str
    attempts: list[Invocation] = field(default_factory=list)
    dead_lettered_to: str | None = None

    @classmethod
    def answered(cls, function: str, invocation: Invocation) -> AsyncInvocation:
        """A synchronous invocation's answer, as a delivery attempted once (no retry, no
        destination): a one-at-a-time redrive's answers read like the asynchronous ones."""
        return cls(function, [invocation])

    @property
    def ok(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].ok


@dataclass(frozen=True)
class _Answer:
    status_code: int


class LocalLambda:
    def __init__(
        self,
        session: Any,
        *,
        now: Callable[[], datetime],
        advance: Callable[[timedelta], object],
        log_dir: Path | None = None,
        functions_dir: Path | None = None,
    ) -> None:
        """``functions_dir``: where the handlers are imported from (default: the project's)."""
        self._lambda = session.client("lambda")
        self._sqs = session.client("sqs")
        self._now = now
        self._advance = advance
        self._log_dir = log_dir
        self.log_dir = log_dir
        """Where each function's log goes (none: the console)."""
        self._handlers: dict[str, Callable[[Any, Any], Any]] = {}
        self.pending: list[tuple[str, Any]] = []
        # A function that invokes another asynchronously (jobs control sending a manual tick):
        # Lambda queues the event and answers 202; here it waits in ``pending`` for run_pending().
        session.events.register("before-call.lambda.Invoke", self._queue_async_invoke)
        functions = str(functions_dir or find_project().functions)
        if functions not in sys.path:
            sys.path.insert(0, functions)

    def invoke(self, function: str, event: Any, request_id: str | None = None) -> Invocation:
        """One invocation; ``request_id`` is Lambda's (a new one unless this retries a request)."""
        config = self._lambda.get_function_configuration(FunctionName=function)
        deadline = self._now() + timedelta(seconds=int(config.get("Timeout", 3)))
        context = LambdaContext(
            function_name=config["FunctionName"],
            invoked_function_arn=config["FunctionArn"],
            memory_limit_in_mb=int(config.get("MemorySize", 128)),
            aws_request_id=request_id or str(uuid.uuid4()),
            remaining_ms=lambda: max(0, int((deadline - self._now()).total_seconds() * 1000)),
        )
        with self._container(config):
            handler = self._handler(config["Handler"], _revision(config))
            outer = (_current.inside, _current.killed)
            _current.inside, _current.killed = True, None
            try:
                return Invocation(ok=True, payload=handler(json.loads(json.dumps(event)), context))
            except InvocationKilled as killed:
                return Invocation(
                    ok=False, error_type=KILLED, error_message=str(killed), exception=killed
                )
            except Exception as error:
                return Invocation(
                    ok=False,
                    error_type=type(error).__name__,
                    error_message=str(error),
                    exception=error,
                )
            finally:
                _current.inside, _current.killed = outer

    @contextmanager
    def concurrently(self, function: str) -> Iterator[None]:
        """Around invocations of ``function`` that run at once: its environment, its log and its
        handler are set up once, so no invocation's set-up or tear-down changes another's."""
        config = self._lambda.get_function_configuration(FunctionName=function)
        with self._container(config):
            self._handler(config["Handler"], _revision(config))
            yield

    @contextmanager
    def _container(self, config: Mapping[str, Any]) -> Iterator[None]:
        """What an invocation runs in: the function's environment and log."""
        region = self._lambda.meta.region_name  # Lambda sets both in every function's environment
        variables = {
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            **config.get("Environment", {}).get("Variables", {}),
        }
        log = self._log_dir / f"{config['FunctionName']}.log" if self._log_dir else None
        with _environment(variables), _output_to(log, variables.get("POWERTOOLS_SERVICE_NAME")):
            yield

    def _queue_async_invoke(self, params: dict[str, Any], **_: Any) -> Any:
        """``params`` is the serialized request: the invocation type is a header, the function
        a path segment (``/2015-03-31/functions/<name>/invocations``)."""
        if params.get("headers", {}).get("X-Amz-Invocation-Type") != "Event":
            return None
        function = urllib.parse.unquote(params["url_path"].split("/")[3])
        self.pending.append((function, json.loads(params.get("body") or b"{}")))
        return _Answer(202), {"StatusCode": 202, "ResponseMetadata": {"HTTPStatusCode": 202}}

    def run_pending(self) -> list[AsyncInvocation]:
        """Deliver the queued asynchronous invocations, in order (retries and DLQ included)."""
        done = []
        while self.pending:
            function, event = self.pending.pop(0)
            done.append(self.invoke_async(function, event))
        return done

    def _handler(self, path: str, revision: str) -> Callable[[Any, Any], Any]:
        """Each LocalLambda is a fresh set of containers: modules are imported anew the first time,
        and again after a deploy changed the function's code or environment, as Lambda starts new
        containers then: what a handler cached from its environment is read again."""
        key = f"{path}@{revision}"
        if key not in self._handlers:
            module, _, name = path.rpartition(".")
            sys.modules.pop(module, None)
            self._handlers[key] = getattr(importlib.import_module(module), name)
        return self._handlers[key]

    def invoke_async(self, function: str, event: Any) -> AsyncInvocation:
        """Lambda's asynchronous invocation: retried under the same request id, as Lambda does
        (the jobs guard tells its own earlier attempt from another delivery by it)."""
        retries, on_failure = self._async_config(function)
        result = AsyncInvocation(function=function)
        request_id = str(uuid.uuid4())
        for attempt in range(retries + 1):
            if attempt:
                self._advance(LAMBDA_RETRY_DELAYS[min(attempt - 1, len(LAMBDA_RETRY_DELAYS) - 1)])
            invocation = self.invoke(function, event, request_id)
            result.attempts.append(invocation)
            if invocation.ok:
                return result
        if on_failure:
            self._send_destination_record(function, event, result, on_failure)
            result.dead_lettered_to = on_failure
        return result

    def _async_config(self, function: str) -> tuple[int, str | None]:
        try:
            config = self._lambda.get_function_event_invoke_config(FunctionName=function)
        except self._lambda.exceptions.ResourceNotFoundException:
            return 2, None
        destination = config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        return int(config.get("MaximumRetryAttempts", 2)), destination

    def _send_destination_record(
        self, function: str, event: Any, result: AsyncInvocation, destination: str
    ) -> None:
        """The record Lambda sends to an on-failure destination (AWS's documented shape)."""
        last = result.attempts[-1]
        arn = self._lambda.get_function_configuration(FunctionName=function)["FunctionArn"]
        record = {
            "version": "1.0",
            "timestamp": iso(self._now()),
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": f"{arn}:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": len(result.attempts),
            },
            "requestPayload": event,
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "responsePayload": {
                "errorType": last.error_type,
                "errorMessage": last.error_message,
                "stackTrace": [],
            },
        }
        queue_name = destination.rsplit(":", 1)[-1]
        url = self._sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        self._sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))


@contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_streams: dict[Path, Any] = {}


@atexit.register
def _close_streams() -> None:
    for stream in _streams.values():
        stream.close()
    _streams.clear()


@contextmanager
def _output_to(path: Path | None, service: str | None) -> Iterator[None]:
    """Send what the function prints (JSON logs, EMF metrics) to its log file, as CloudWatch would.

    Log files stay open for the life of the process: a Powertools logger keeps the stream it was
    created with, so its handlers are pointed at the right file around every invocation.
    """
    if path is None:
        yield
        return
    if path not in _streams:
        path.parent.mkdir(parents=True, exist_ok=True)
        _streams[path] = path.open("a", buffering=1)
    stream = _streams[path]

    def handlers() -> list[logging.StreamHandler[Any]]:
        return [
            h
            for h in logging.getLogger(service or "").handlers
            if isinstance(h, logging.StreamHandler)
        ]

    for handler in handlers():
        _point(handler, stream)
    try:
        with redirect_stdout(stream):
            yield
    finally:
        for handler in handlers():
            _point(handler, stream)


def _point(handler: logging.StreamHandler[Any], stream: Any) -> None:
    """``setStream`` flushes the old stream first: one closed since (a test's captured stdout
    the logger was created with) is replaced without it."""
    if getattr(handler.stream, "closed", False):
        handler.stream = stream
    else:
        handler.setStream(stream)


def _revision(config: Mapping[str, Any]) -> str:
    """What a function's containers are made from (moto keeps no ``RevisionId``)."""
    made_of = [config.get("CodeSha256"), config.get("Environment", {}).get("Variables", {})]
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:16]
