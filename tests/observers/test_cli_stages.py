"""``vigil --stage NAME``: the CLI finds the stage's stack (``Vigil-NAME``) and its API by itself,
from CloudFormation's DescribeStacks on moto; a stage that is not deployed names those that are."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest

from tests.conftest import REGION
from vigil_tools import cli
from vigil_tools.api_client import HttpRequest, HttpResponse
from vigil_tools.cli import EXIT_API_ERROR, EXIT_OK, EXIT_USAGE, main

STAGING_API = "https://staging1234.execute-api.us-east-1.amazonaws.com/v1/"


def _deploy(cloudformation: Any, name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.fixture
def session(aws: None) -> Any:
    """Three stacks: the default stage, the staging stage, and a stack that is not Vigil's."""
    session = boto3.Session(region_name=REGION)
    cloudformation = session.client("cloudformation")
    _deploy(cloudformation, "Vigil", {"JobsApiEndpoint": "https://default.example/v1/"})
    _deploy(cloudformation, "Vigil-staging", {"JobsApiEndpoint": STAGING_API})
    _deploy(cloudformation, "Vigilant-other", {"Something": "else"})
    return session


class Recorded:
    """SigV4Transport's stand-in: the endpoint the CLI chose, and a canned answer."""

    endpoints: list[str] = []

    def __init__(self, endpoint: str, *, region: str | None = None) -> None:
        Recorded.endpoints.append(endpoint)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, json.dumps({"kinds": ["ticker"]}).encode())


def vigil(session: Any, *argv: str, environ: dict[str, str] | None = None) -> tuple[int, str]:
    err = io.StringIO()
    code = main(list(argv), session=session, stdout=io.StringIO(), stderr=err, environ=environ)
    return code, err.getvalue()


def test_a_stage_s_api_is_read_from_its_stack(
    session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "SigV4Transport", Recorded)
    Recorded.endpoints = []
    assert vigil(session, "--stage", "staging", "observers", "kinds") == (EXIT_OK, "")
    # Without --stage, as before: the URL from the environment
    environ = {"VIGIL_API_URL": "https://exported.example/v1/"}
    assert vigil(session, "observers", "kinds", environ=environ) == (EXIT_OK, "")
    assert Recorded.endpoints == [STAGING_API, "https://exported.example/v1/"]


def test_a_stage_that_is_not_deployed_names_the_vigil_stacks_that_are(session: Any) -> None:
    code, err = vigil(session, "--stage", "prod", "observers", "kinds")
    assert code == EXIT_API_ERROR
    assert "stack 'Vigil-prod' not found" in err
    assert err.rstrip().endswith("Vigil stacks deployed here: Vigil, Vigil-staging")
    # The jobs and tasks commands read the stage's stack too, and say the same
    for group in (["jobs", "list"], ["tasks", "list", "send-receipt"]):
        code, err = vigil(session, "--stage", "prod", *group)
        assert code == EXIT_API_ERROR, group
        assert "'Vigil-prod' not found" in err and "here: Vigil, Vigil-staging" in err, group


def test_an_invalid_stage_is_a_usage_error_naming_it() -> None:
    code, err = vigil(None, "--stage", "no_underscores", "observers", "kinds")
    assert code == EXIT_USAGE and "stage 'no_underscores'" in err
