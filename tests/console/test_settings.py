"""The console functions' environment and malformed invocations: each refused with a message
that names what is wrong, nothing written. Pure: about 0.05 s."""

from __future__ import annotations

from typing import Any

import pytest

from tests.console.markup_check import assert_inert
from tests.console.test_scale import services
from vigil.console import widget
from vigil.console.controls import CwdbControls
from vigil.console.settings import ConsoleSettings
from vigil.contract.console import Role
from vigil.settings import SettingsError

COMPLETE = {
    "VIGIL_STACK": "Vigil",
    "VIGIL_RUNS_TABLE": "runs",
    "VIGIL_CONSOLE_ROLE": "view",
    "VIGIL_CONSOLE_OPERATE_ARN": "arn:aws:lambda:us-east-1:1:function:op",
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"VIGIL_STACK": ""}, "VIGIL_STACK"),
        ({"VIGIL_CONSOLE_ROLE": "admin"}, "must be view or operate, got 'admin'"),
        ({"VIGIL_CONSOLE_OPERATE_ARN": ""}, "VIGIL_CONSOLE_OPERATE_ARN is required"),
    ],
)
def test_a_bad_environment_is_refused_naming_the_variable(
    change: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        ConsoleSettings.from_env({**COMPLETE, **change})


def test_the_operate_function_needs_no_operate_arn() -> None:
    settings = ConsoleSettings.from_env(
        {**COMPLETE, "VIGIL_CONSOLE_ROLE": "operate", "VIGIL_CONSOLE_OPERATE_ARN": ""}
    )

    assert settings.role is Role.OPERATE


def answer(event: dict[str, Any]) -> str:
    from tests.console.test_scale import Calls

    return widget.answer(
        event, services(Calls()), CwdbControls("arn:v", "arn:o"), Role.OPERATE, "r-1"
    )


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({"action": "jobs.explode"}, "unknown action &#x27;jobs.explode&#x27;"),
        ({"action": "jobs.run"}, "Refused: the button sent no job"),
        ({"action": "jobs.run", "job": "nope"}, "Refused: "),
        (
            {"action": "jobs.settle", "job": "job-001", "tick": "t", "effect": "e", "verdict": "x"},
            "unknown verdict",
        ),
        ({"page": "jobs", "next": "not-a-token"}, "Refused: "),
    ],
)
def test_a_malformed_invocation_is_answered_on_the_page(event: dict[str, Any], said: str) -> None:
    html = answer(event)

    assert_inert(html)
    assert said in html


def test_an_unknown_page_draws_what_is_wrong_now() -> None:
    assert "What is wrong now" in answer({"page": "<script>"})


@pytest.mark.parametrize(
    "event",
    [
        {"page": "jobs", "status": 5},
        {"page": "jobs", "next": 7},
        {"page": "jobs", "job": ["job-001"]},
        {"page": "jobs", "status": {"FAILED": 1}},
        {"page": "jobs", "job": "j" * 5_000},
        {"page": "observers", "next": ["0"]},
        {"action": "jobs.pause", "job": ["job-001"], "page": "jobs"},
    ],
    ids=[
        "status-number",
        "next-number",
        "job-list",
        "status-object",
        "job-huge",
        "cursor-list",
        "action-list",
    ],
)
def test_a_page_parameter_no_page_sends_is_refused_on_the_page(event: dict[str, Any]) -> None:
    html = answer(event)

    assert_inert(html)
    assert "Refused: " in html
