"""The stack as third-party scanners see it: cdk-nag, checkov and cfn-lint find nothing unexplained.

cdk-nag runs inside every synth (a validation plugin, ``app.py``); its report lands beside the
template. checkov (its own virtualenv, ``make install``) and cfn-lint read the synthesized template
with the project's skip lists, where every skip carries its reason.

Each check runs for the default stage and for a named one (the session's ``staging`` app, which the
stages' tests synthesize anyway): a stage's names and conditions are its own template, so a finding
in one stage only cannot hide. checkov and cfn-lint each run once, over both templates (a
module-scoped run), and each stage's test reads its own template's part of that report: checkov's
start-up is half the cost of a run of one template (~4 of ~8.5 CPU s), so the second stage costs
~4.5 s rather than ~8.5, and cfn-lint's second template ~6 s rather than ~7.
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


def template_file(app: Synthesized, fixture: str) -> Path:
    return app.outdir / f"{STAGES[fixture]}.template.json"


@pytest.fixture(params=list(STAGES))
def scanned(request: pytest.FixtureRequest) -> tuple[Synthesized, Path]:
    """One stage's synthesized app and its template file: the default stage, then ``staging``."""
    app: Synthesized = request.getfixturevalue(request.param)
    return app, template_file(app, request.param)


@pytest.fixture(scope="module")
def templates(synthesized: Synthesized, staging: Synthesized) -> list[Path]:
    """Every scanned stage's template file, in the order of STAGES."""
    apps = {"synthesized": synthesized, "staging": staging}
    return [template_file(apps[fixture], fixture) for fixture in STAGES]


@pytest.fixture(scope="module")
def checkov_report(templates: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """checkov's JSON report of one run over every stage's template, with the project's config.

    The config's ``quiet: true`` (for a person reading the console) would leave the passed checks
    out of the report; the run reads a copy that differs in that line alone, so that each stage's
    test can count the checks its own template passed (``file_abs_path``).
    """
    assert CHECKOV.exists(), "checkov lives in .venv-scan: run `make install`"
    text = (ROOT / ".checkov.yaml").read_text()
    assert re.search(r"^quiet: true$", text, flags=re.MULTILINE), "the config sets quiet: true"
    config = tmp_path_factory.mktemp("checkov") / "checkov.yaml"
    config.write_text(re.sub(r"^quiet: true$", "quiet: false", text, flags=re.MULTILINE))
    result = subprocess.run(
        [str(CHECKOV), "--config-file", str(config), "-f", *map(str, templates), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.stdout, result.stderr[-3000:]
    output = json.loads(result.stdout)
    return output[0] if isinstance(output, list) else output


@pytest.fixture(scope="module")
def cfn_lint(templates: list[Path]) -> subprocess.CompletedProcess[str]:
    """One cfn-lint run over every stage's template (each finding names its file)."""
    return subprocess.run(
        [CFN_LINT, *map(str, templates)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


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


def test_checkov_passes_with_only_the_explained_skips(
    scanned: tuple[Synthesized, Path], templates: list[Path], checkov_report: Any
) -> None:
    skipped = skips(ROOT / ".checkov.yaml")
    assert skipped and all(len(reason) >= 40 for reason in skipped.values()), skipped
    results, summary = checkov_report["results"], checkov_report["summary"]
    # Every check of the report names the template it read, and the report lists every failure.
    files = {path.resolve() for path in templates}
    assert {Path(c["file_abs_path"]).resolve() for c in results["passed_checks"]} == files
    assert {Path(c["file_abs_path"]).resolve() for c in results["failed_checks"]} <= files
    assert summary["failed"] == len(results["failed_checks"]) and summary["parsing_errors"] == 0

    def this_stage(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [c for c in checks if Path(c["file_abs_path"]).resolve() == scanned[1].resolve()]

    failed = [(c["check_id"], c["resource"]) for c in this_stage(results["failed_checks"])]
    assert failed == []
    assert len(this_stage(results["passed_checks"])) > 100


def test_cfn_lint_is_clean(
    scanned: tuple[Synthesized, Path],
    templates: list[Path],
    cfn_lint: subprocess.CompletedProcess[str],
) -> None:
    ignored = skips(ROOT / ".cfnlintrc.yaml")
    assert all(len(reason) >= 30 for reason in ignored.values()), ignored
    report = cfn_lint.stdout + cfn_lint.stderr
    assert str(scanned[1]) not in report, report  # no finding in this stage's template
    assert cfn_lint.returncode == 0, report  # nor in another's, nor a failure naming no file
