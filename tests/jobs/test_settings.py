"""Reading a function's environment: one reader, one error that names the variable."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

import pytest

from vigil.jobs.model import JobSettings
from vigil.observers.reconciler.config import ReconcilerConfig
from vigil.settings import Environment, SettingsError


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


def test_values_are_read_typed_with_defaults_for_empty_or_absent_variables() -> None:
    read = Environment(
        {
            "T": " table ",
            "N": "7",
            "S": "1.5",
            "F": "false",
            "C": "blue",
            "L": "a, b,",
            "M": '{"k": "v"}',
        }
    )
    assert read.text("T") == "table" and read.text("MISSING", "x") == "x"
    assert read.integer("N", minimum=1) == 7 and read.integer("EMPTY", minimum=1, default=3) == 3
    assert read.seconds("S", timedelta(0)) == timedelta(seconds=1.5)
    assert read.flag("F", True) is False and read.flag("MISSING", True) is True
    assert read.choice("C", Color, Color.RED) is Color.BLUE
    assert read.items("L") == ["a", "b"] and read.mapping("M") == {"k": "v"}


@pytest.mark.parametrize(
    ("env", "read", "message"),
    [
        ({}, lambda r: r.text("V"), "environment variable V is required"),
        ({"V": "x"}, lambda r: r.integer("V", minimum=1), "V: must be an integer"),
        ({"V": "0"}, lambda r: r.integer("V", minimum=1), "V: must be >= 1"),
        ({"V": "-1"}, lambda r: r.seconds("V", timedelta(0)), "V: must not be negative"),
        ({"V": "maybe"}, lambda r: r.flag("V", True), "V: must be true or false"),
        ({"V": "green"}, lambda r: r.choice("V", Color, Color.RED), "V: must be one of"),
        ({"V": " , "}, lambda r: r.items("V"), "V: must list at least one item"),
        ({"V": "{"}, lambda r: r.mapping("V"), "V: is not JSON"),
        ({"V": "[]"}, lambda r: r.mapping("V"), "V: must be a non-empty JSON object"),
    ],
)
def test_a_bad_variable_is_named_in_the_error(
    env: dict[str, str], read: object, message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        read(Environment(env))  # type: ignore[operator]


def test_gather_reports_every_bad_variable_at_once() -> None:
    read = Environment({"B": "x"})
    with pytest.raises(SettingsError) as raised:
        read.gather(a=lambda: read.text("A"), b=lambda: read.integer("B", minimum=0))
    assert "A is required" in str(raised.value) and "B: must be an integer" in str(raised.value)


RECONCILER_ENV = {
    "VIGIL_REGISTRY_TABLE": "t",
    "VIGIL_CLUSTER_ARN": "c",
    "VIGIL_TASK_DEFINITIONS": '{"ticker": "td"}',
    "VIGIL_CONTAINER_NAME": "observer",
    "VIGIL_SUBNETS": "subnet-1",
    "VIGIL_SECURITY_GROUPS": "sg-1",
    "VIGIL_OBSERVERS_DLQ_URL": "https://sqs/q",
    "VIGIL_HEARTBEAT_SECONDS": "30",
}


def test_an_empty_overlap_is_refused_not_taken_for_the_default() -> None:
    env = {"VIGIL_JOB_NAME": "j", "VIGIL_RUNS_TABLE": "t", "VIGIL_OVERLAP": ""}
    with pytest.raises(SettingsError, match="VIGIL_OVERLAP"):
        JobSettings.from_env(env)


def test_an_empty_assign_public_ip_is_refused_not_taken_for_a_public_ip() -> None:
    with pytest.raises(SettingsError, match="VIGIL_ASSIGN_PUBLIC_IP"):
        ReconcilerConfig.from_env({**RECONCILER_ENV, "VIGIL_ASSIGN_PUBLIC_IP": ""})


def test_an_empty_max_duration_is_refused_not_taken_for_no_flag() -> None:
    env = {"VIGIL_JOB_NAME": "j", "VIGIL_RUNS_TABLE": "t", "VIGIL_MAX_DURATION_SECONDS": ""}
    with pytest.raises(SettingsError, match="VIGIL_MAX_DURATION_SECONDS"):
        JobSettings.from_env(env)
    absent = JobSettings.from_env({"VIGIL_JOB_NAME": "j", "VIGIL_RUNS_TABLE": "t"})
    assert absent.max_duration is None and absent.min_duration is None
