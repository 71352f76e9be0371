"""Stages side by side: a named stage (``-c stage=staging``) shares no physical name and no alarm
metric with the default stage, whose names and alarm metrics stay what they were before stages.

Cost: the default stage is the session's ``synthesized`` app and the staging stage the session's
``staging`` app (~50 s on this machine, shared with the scanners' tests); every other test is under
a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from app import build_app, main
from infra.stage import owns_api_gateway_account
from tests.helpers.monitoring import Series, alarm_series, emitted, series_read
from tests.helpers.stages import (
    DEFAULT_STAGE_FILE,
    STAGING,
    alarm_metrics,
    identity,
    physical_names,
)
from vigil import telemetry
from vigil.contract.metrics import (
    NAMESPACE,
    STAGE_DIMENSION,
    ObserverMetric,
    powertools_environment,
)
from vigil.contract.stages import (
    InvalidStage,
    check_stage,
    derived_names,
    max_stage_length,
    stack_name,
)
from vigil.contract.tasks import TaskStatus
from vigil.observers.reconciler import powertools_metric
from vigil.tasks.completion import completion_entry
from vigil_tools.emulator.template import STACK_NAME, Synthesized

STAGE = STAGING
ROOT = Path(__file__).resolve().parents[2]


ENTITIES = ("Cleanup", "cleanup", "DailyReport", "dailyreport", "SendReceipt", "ProvisionTenant")
"""The example's jobs and tasks: their own resources moved into their shards (the upgrade the
deploying guide describes), and their alarms into the stack's Metrics Insights alarms."""


def moved_to_the_shards(entry: list[Any]) -> bool:
    """A name or alarm metric of a job's or task's own, before its shard: one the upgrade to the
    shards replaces by design (docs/design/scale.md)."""
    if len(entry) == 3:  # an alarm metric: (namespace, metric, dimensions)
        keys = {key for key, _ in entry[2]}
        return bool(keys & {"job", "task"}) or any(e in json.dumps(entry) for e in ENTITIES)
    kind, name = entry
    if any(entity in name for entity in ENTITIES) or name.startswith("Vigil-Monitoringtask"):
        return True
    # A job's schedule's own role (the audit's stays): the shard's one role now
    return kind == "AWS::IAM::Role" and "SchedulerRoleForTarget" in name


def test_the_default_stage_keeps_todays_names_and_alarm_metrics(
    synthesized: Synthesized, migrating: Synthesized
) -> None:
    # What the stack Vigil named and alarmed on before stages (main's synth, kept in a file) ...
    before = json.loads(DEFAULT_STAGE_FILE.read_text())
    upgrade = identity(migrating, STACK_NAME)
    now = identity(synthesized, STACK_NAME)
    # ... is all still there, unchanged, in the upgrade's deploy (-c legacyRegistry=true) and
    # the one after it: an existing deploy updates in place (new resources may be added; none
    # renamed, no alarm moved to another metric), but for the jobs' and tasks' own, which the
    # shards replaced (the tables, the fleet, the APIs are untouched). The registry keyed by name
    # stays in both (docs/guides/deploying.md "Upgrading to the registry keyed by kind").
    for template in (upgrade, now):
        for key in ("physical_names", "alarm_metrics"):
            missing = [
                e for e in before[key] if e not in template[key] and not moved_to_the_shards(e)
            ]
            assert missing == [], key
    assert len(synthesized.resources("AWS::ApiGateway::Account")) == 1


def test_two_stages_share_no_physical_name_and_no_alarm_metric(
    synthesized: Synthesized, staging: Synthesized
) -> None:
    default_names = physical_names(synthesized, STACK_NAME)
    staging_names = physical_names(staging, stack_name(STAGE))
    default_alarms = alarm_metrics(synthesized, STACK_NAME)
    staging_alarms = alarm_metrics(staging, stack_name(STAGE))
    assert len(default_names) > 90 and len(staging_names) > 90
    assert len(default_alarms) > 20 and len(staging_alarms) > 20
    # docs/guides/deploying.md "Stages": 0 shared physical names, 0 shared alarm metric identities
    assert default_names & staging_names == set()
    assert default_alarms & staging_alarms == set()
    # Every Vigil metric the staging dashboard and alarms read carries its stage; none of the
    # default's carries one (today's identities).
    assert all((STAGE_DIMENSION, STAGE) in dims for _, _, dims in series_read(staging, NAMESPACE))
    assert not any(
        name == STAGE_DIMENSION
        for _, _, dims in series_read(synthesized, NAMESPACE)
        for name, _ in dims
    )


def test_a_named_stage_tells_every_function_and_container_its_stage(staging: Synthesized) -> None:
    functions = staging.resources("AWS::Lambda::Function").values()
    assert functions and all(
        f["Properties"]["Environment"]["Variables"]["VIGIL_STAGE"] == STAGE for f in functions
    )
    containers = [
        container
        for definition in staging.resources("AWS::ECS::TaskDefinition").values()
        for container in definition["Properties"]["ContainerDefinitions"]
    ]
    assert containers and all(
        {"Name": "VIGIL_STAGE", "Value": STAGE} in c["Environment"] for c in containers
    )


def test_the_api_gateway_account_is_owned_by_at_most_one_stage(staging: Synthesized) -> None:
    # A named stage leaves the account's API Gateway settings alone unless told to own them ...
    assert staging.resources("AWS::ApiGateway::Account") == {}
    assert not owns_api_gateway_account(App(context={"stage": "prod"}))
    assert owns_api_gateway_account(App(context={"stage": "prod", "apiGatewayAccount": "true"}))
    # ... and the default stage owns them (as before stages) unless told not to
    assert owns_api_gateway_account(App())
    assert not owns_api_gateway_account(App(context={"apiGatewayAccount": False}))
    with pytest.raises(ValueError, match="apiGatewayAccount='yes'"):
        owns_api_gateway_account(App(context={"apiGatewayAccount": "yes"}))


@pytest.mark.parametrize(
    "stage",
    [
        "under_score",
        "-leading",
        "trailing-",
        "dot.ted",
        "sp ace",
        "",
        "x" * (max_stage_length() + 1),
    ],
)
def test_an_invalid_stage_fails_the_synth_naming_it(stage: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidStage, match=f"stage {stage!r}"):
        build_app(outdir=str(tmp_path), stage=stage)
    with pytest.raises(SystemExit, match=f"error: stage {stage!r}"):
        main([f"--stage={stage}"])


def test_an_invalid_stage_from_the_cdk_cli_fails_naming_it(tmp_path: Path) -> None:
    """``cdk synth -c stage=NAME`` (``make cdk-synth STAGE=NAME``): the CDK CLI runs ``app.py``
    with its context in ``CDK_CONTEXT_JSON``, read as the jsii process starts (hence a process of
    its own here, ~10 s); the app stops before synthesizing anything, naming the stage."""
    environ = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"stage": "under_score"}),
        "CDK_OUTDIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error: stage 'under_score'" in result.stderr
    assert not list(tmp_path.glob("*.template.json"))


def test_the_longest_stage_fits_every_derived_name() -> None:
    longest = "s" * max_stage_length()
    # A job's or task's function: Vigil-<stage>_task_<name>, cut to 64 with a digest, keeps the
    # stack's name whole and at least one character of its own.
    assert max_stage_length() == 42
    assert check_stage(longest) == longest
    for name, limit in derived_names(stack_name(longest)).items():
        assert len(name) <= limit, name
    with pytest.raises(InvalidStage, match=r"at most 42 fit.*'Vigil-s+_task_x-0+' would be 65"):
        check_stage(longest + "s")


@pytest.fixture
def staged_code(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment the staging functions get; Powertools' shared metric set rebuilt for it."""
    for name, value in powertools_environment(STAGE).items():
        monkeypatch.setenv(name, value)
    telemetry.metrics.cache_clear()
    telemetry.metrics().clear_metrics()
    yield
    telemetry.metrics().clear_metrics()
    telemetry.metrics().clear_default_dimensions()
    telemetry.metrics.cache_clear()


def test_the_code_of_a_stage_emits_what_its_alarms_read(
    staging: Synthesized, staged_code: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every Vigil metric a staging alarm reads, emitted the way the code emits it: the fleet's
    # through the reconciler's sink (fleet-wide through the invocation's metrics, per kind one at
    # a time), the jobs' and tasks' one at a time (the audit's and the API's counts)
    read: set[Series] = {
        s for alarm in staging.resources("AWS::CloudWatch::Alarm").values() for s in _alarm(alarm)
    }
    assert read
    for _, name, dims in read:
        keys = dict(dims)
        if name in {metric.value for metric in ObserverMetric}:
            powertools_metric(ObserverMetric(name), keys.get("kind"), 1)
        else:
            others = {k: v for k, v in keys.items() if k in ("job", "task")}
            telemetry.count_one(name, **others)
    telemetry.metrics().flush_metrics()
    # Then each is emitted under exactly the dimensions the alarm reads: service, stage and its own
    assert read <= set(emitted(capsys.readouterr().out))


def _alarm(alarm: dict[str, Any]) -> list[Series]:
    return [s for s in alarm_series(alarm) if s[0] == NAMESPACE]


def test_a_named_stage_s_completion_events_have_a_source_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An application's rule for production ({"source": ["vigil"]}) must not hear staging's tasks
    def source() -> str:
        return str(
            completion_entry(
                task="send-receipt",
                task_id="o-1",
                status=TaskStatus.SUCCEEDED,
                attempts=1,
                enqueued_at=None,
                finished_at="2026-11-25T12:00:00Z",
                bus="default",
            )["Source"]
        )

    monkeypatch.delenv("VIGIL_STAGE", raising=False)
    assert source() == "vigil"
    monkeypatch.setenv("VIGIL_STAGE", STAGE)
    assert source() == "vigil.staging"
