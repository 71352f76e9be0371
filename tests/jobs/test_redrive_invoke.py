"""The synchronous invoke a skip job's redrive waits on: what Lambda answers, read right."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
from botocore.response import StreamingBody
from botocore.stub import Stubber

from vigil_tools import jobs_cli


class Session:
    """A boto3 session whose Lambda client is the stubbed one, and records its configuration."""

    def __init__(self) -> None:
        self.configs: list[Any] = []
        self.lambda_client = boto3.client("lambda", region_name="us-east-1")
        self.stubber = Stubber(self.lambda_client)

    def client(self, name: str, config: Any = None) -> Any:
        assert name == "lambda"
        self.configs.append(config)
        return self.lambda_client


def payload(value: Any) -> StreamingBody:
    raw = json.dumps(value).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def test_a_function_error_is_a_failed_answer_with_its_type_and_message() -> None:
    session = Session()
    session.stubber.add_response(
        "invoke",
        {
            "StatusCode": 200,
            "FunctionError": "Unhandled",
            "Payload": payload({"errorType": "TickBusy", "errorMessage": "overlaps tick 06:00"}),
        },
    )
    with session.stubber:
        answer = jobs_cli._synchronous(session, 240)("fn", {"requestPayload": {}})
    assert (answer.ok, answer.error_type, answer.error_message) == (
        False,
        "TickBusy",
        "overlaps tick 06:00",
    )


def test_a_success_is_ok_and_the_wait_outlasts_the_function_without_a_second_send() -> None:
    session = Session()
    session.stubber.add_response(
        "invoke", {"StatusCode": 200, "Payload": payload({"outcome": "SUCCEEDED"})}
    )
    with session.stubber:
        assert jobs_cli._synchronous(session, 240)("fn", {}).ok
    (config,) = session.configs
    assert config.read_timeout == 240 + jobs_cli.READ_MARGIN_S
    assert config.retries == {"total_max_attempts": 1}


def test_an_invoke_the_service_refuses_is_a_failed_answer_not_a_crash() -> None:
    session = Session()
    session.stubber.add_client_error("invoke", "TooManyRequestsException", "Rate exceeded")
    with session.stubber:
        answer = jobs_cli._synchronous(session, 60)("fn", {})
    assert (answer.ok, answer.error_type) == (False, "TooManyRequestsException")
    assert "Rate exceeded" in str(answer.error_message)
