"""Found by the review of the console after job control joined it; each failed before its fix."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.nag import suppress_accepted_findings
from vigil_tools.emulator.template import Synthesized


def _nag(app: App, tmp_path: Path) -> dict[str, Any]:
    with contextlib.suppress(Exception):  # a failed validation still writes its report
        app.synth()
    return json.loads((tmp_path / "validation-report.json").read_text())


def test_a_stack_without_an_observer_fleet_synthesizes_under_the_apps_nag_plugin(
    tmp_path: Path,
) -> None:
    """VigilStack supports no fleet (JobsControl then builds its own REST API), but that API has no
    access logs: AwsSolutions-APIG1 stops the synth of every jobs-only app."""
    import app as vigil_app
    from infra.stack import VigilStack

    app = App(outdir=str(tmp_path), context=vigil_app.cdk_json_context())
    stack = VigilStack(app, "JobsOnly", declare_jobs=vigil_app.declare_jobs)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    suppress_accepted_findings(stack)
    report = _nag(app, tmp_path)
    violations = [
        (v["ruleName"], [r.get("constructPath") for r in v.get("violatingConstructs", [])])
        for p in report["pluginReports"]
        for v in p["violations"]
    ]
    assert violations == []


def _alarmed_queues(synthesized: Synthesized) -> set[str]:
    found = set()
    for alarm in synthesized.resources("AWS::CloudWatch::Alarm").values():
        text = json.dumps(alarm["Properties"])
        for queue in synthesized.resources("AWS::SQS::Queue"):
            if f'["{queue}", "QueueName"]' in text:
                found.add(queue)
    return found


def test_every_dead_letter_queue_is_alarmed(synthesized: Synthesized) -> None:
    """JobsControl's AuditUndelivered queue (the never-delivered audit's schedule DLQ) has no
    alarm: if the scheduler cannot invoke the audit, never-delivered ticks are never detected."""
    queues = set(synthesized.resources("AWS::SQS::Queue"))
    assert queues - _alarmed_queues(synthesized) == set()


def test_every_function_is_on_the_dashboard(
    synthesized: Synthesized,
) -> None:
    """The JobsControl function (API routes + the scheduled audit) is missing from the dashboard
    (tests/infra/test_monitoring.py's dashboard test is red at this commit)."""
    dashboard = json.dumps(list(synthesized.resources("AWS::CloudWatch::Dashboard").values()))
    functions = synthesized.resources("AWS::Lambda::Function")
    missing = [f for f in functions if f not in dashboard]
    assert missing == []


def test_the_audits_failed_async_invocations_are_kept(synthesized: Synthesized) -> None:
    """Scheduler invokes the audit asynchronously; after Lambda's retries a failed audit is dropped
    (no on-failure destination, unlike the jobs' and the reconciler's)."""
    functions = synthesized.resources("AWS::Lambda::Function")
    configured = {
        c["Properties"]["FunctionName"]["Ref"]
        for c in synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
    }
    control = [f for f in functions if f.startswith("JobsControlFunction")]
    assert control and set(control) <= configured


def test_two_vigil_stacks_in_one_account_do_not_share_api_metrics() -> None:
    """The API 5XX alarm and the API row read ``ApiName=Api``: every Vigil stack (and any other API
    called "Api") in the account and region feeds the same series. Dashboard names were made
    unique per stack for this reason; the API name was not."""
    from aws_cdk.assertions import Template

    import app as vigil_app
    from infra.stack import VigilStack

    app = App(context=vigil_app.cdk_json_context())
    stacks = [
        VigilStack(
            app,
            stack_name,
            declare_jobs=vigil_app.declare_jobs,
            declare_observers=vigil_app.declare_observers,
        )
        for stack_name in ("VigilStaging", "VigilProd")
    ]
    assembly = app.synth()  # once for both (Template.from_stack would synthesize the app per stack)
    names = []
    for stack in stacks:
        template = Template.from_json(assembly.get_stack_by_name(stack.stack_name).template)
        alarms = template.find_resources(
            "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "5XXError"}}
        )
        (alarm,) = alarms.values()
        names.append(json.dumps(alarm["Properties"]["Dimensions"]))
    assert names[0] != names[1], names


def test_gauge_alarms_do_not_clear_when_the_resync_emits_nothing(
    synthesized: Synthesized,
) -> None:
    """FleetFailed and the shortfall are gauges only the resync emits. A skipped pass (lease held,
    up to 240 s after a pass that timed out) leaves no datapoint; with notBreaching the
    FAILED-observer alarm sends OK although the observer is still FAILED, then ALARM again."""
    alarms = {
        r["Metadata"]["aws:cdk:path"].split("/")[-2]: r["Properties"]
        for r in synthesized.resources("AWS::CloudWatch::Alarm").values()
    }
    for name in ("ObserversInFailedAlarm", "FleetShortfallAlarm"):
        assert alarms[name]["TreatMissingData"] != "notBreaching", name
