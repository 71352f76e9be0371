"""The stack as third-party scanners see it: cdk-nag, checkov and cfn-lint find nothing unexplained.

cdk-nag runs inside every synth (a validation plugin, ``app.py``); its report lands beside the
template. checkov (its own virtualenv, ``make install``) and cfn-lint read the synthesized template
with the project's skip lists, where every skip carries its reason.

Each check runs for the default stage and for a named one (the session's ``staging`` app, which the
stages' tests synthesize anyway): a stage's names and conditions are its own template, so a finding
in one stage only cannot hide. The named stage adds one checkov and one cfn-lint run (~70 s on this loaded machine).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from infra.nag import suppress_accepted_findings
from tests.helpers.stages import STAGING
from vigil.contract.stages import stack_name
from vigil_tools.emulator.template import STACK_NAME, Synthesized

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / ".venv-scan" / "bin" / "checkov"
CFN_LINT = str(Path(sys.executable).parent / "cfn-lint")
SKIP_LINE = re.compile(r"^\s*-\s*(?P<check>[A-Z]+_?[A-Z]*_?\d+)\s*(?:#\s*(?P<reason>.*))?$")
STAGES = {"synthesized": STACK_NAME, "staging": stack_name(STAGING)}
"""Each scanned app's session fixture -> its stack's name (the template file's)."""


@pytest.fixture(params=list(STAGES))
def scanned(request: pytest.FixtureRequest) -> tuple[Synthesized, Path]:
    """One stage's synthesized app and its template file: the default stage, then ``staging``."""
    app: Synthesized = request.getfixturevalue(request.param)
    return app, app.outdir / f"{STAGES[request.param]}.template.json"


def skips(config: Path) -> dict[str, str]:
    """Check id -> reason, from the list items of a scanner's YAML config."""
    found = {}
    for line in config.read_text().splitlines():
        match = SKIP_LINE.match(line)
        if match:
            found[match["check"]] = (match["reason"] or "").strip()
    return found


def nag_report(synthesized: Synthesized) -> dict[str, Any]:
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return dict(plugin)


def test_cdk_nag_finds_nothing_unacknowledged_and_each_acknowledgment_says_why(
    scanned: tuple[Synthesized, Path],
) -> None:
    plugin = nag_report(scanned[0])
    assert plugin["conclusion"] == "success" and plugin["violations"] == []
    suppressed = plugin["suppressedViolations"]
    assert suppressed, "the report lists what was acknowledged"
    for violation in suppressed:
        assert violation["ruleName"].startswith("AwsSolutions-")
        assert violation["acknowledgedId"].endswith(violation["ruleName"])
        assert len(violation["reason"]) >= 40, violation


def test_a_new_cdk_nag_finding_stops_the_synth(tmp_path: Path) -> None:
    """A bucket without TLS enforcement or access logs is no finding Vigil accepts."""
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Nagged")
    s3.Bucket(stack, "Careless")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    suppress_accepted_findings(stack)
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    assert "AwsSolutions-S10" in rules


def test_checkov_passes_with_only_the_explained_skips(scanned: tuple[Synthesized, Path]) -> None:
    assert CHECKOV.exists(), "checkov lives in .venv-scan: run `make install`"
    skipped = skips(ROOT / ".checkov.yaml")
    assert skipped and all(len(reason) >= 40 for reason in skipped.values()), skipped
    result = subprocess.run(
        [
            str(CHECKOV),
            "--config-file",
            str(ROOT / ".checkov.yaml"),
            "-f",
            str(scanned[1]),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    output = json.loads(result.stdout)
    report = output[0] if isinstance(output, list) else output
    failed = [(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]]
    assert failed == [] and report["summary"]["failed"] == 0
    assert report["summary"]["passed"] > 100 and report["summary"]["parsing_errors"] == 0


def test_cfn_lint_is_clean(scanned: tuple[Synthesized, Path]) -> None:
    ignored = skips(ROOT / ".cfnlintrc.yaml")
    assert all(len(reason) >= 30 for reason in ignored.values()), ignored
    result = subprocess.run(
        [CFN_LINT, str(scanned[1])],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
