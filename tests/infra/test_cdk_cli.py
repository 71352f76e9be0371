"""``make cdk-synth``: the path a real deploy takes, through the CDK CLI version package.json pins.

The one synth of the suite that runs the CDK's built-in CloudFormation validation (the suite's other
processes turn it off, tests/conftest.py): with cdk.json's ``validateAgainstDefaultRules`` an error
fails this synth, and the CLI's performance counters show the validation ran and found nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_cdk_synth_synthesizes_through_the_pinned_cli() -> None:
    environment = {k: v for k, v in os.environ.items() if k != "CDK_VALIDATION"}
    result = subprocess.run(
        ["make", "--no-print-directory", "cdk-synth"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # The Makefile's PATH: the CLI and the app it runs on the pinned Node, which jsii does not warn of.
    assert "end-of-life" not in result.stderr, result.stderr[-3000:]
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    installed = json.loads((ROOT / "node_modules" / "aws-cdk" / "package.json").read_text())
    assert installed["version"] == pinned
    template = json.loads((ROOT / "cdk.out" / "Vigil.template.json").read_text())
    assert {"AlarmTopicArn", "DashboardName", "CatalogPath"} <= set(template["Outputs"])
    report = json.loads((ROOT / "cdk.out" / "validation-report.json").read_text())
    assert all(p["violations"] == [] for p in report["pluginReports"])
    counters = json.loads((ROOT / "cdk.out" / "performance-counters.json").read_text())["counters"]
    assert counters.get("CloudFormationValidate.validate(cnt)") == 1, counters  # the one stack
    assert counters["CloudFormationValidate.diagnostics"] == 0, counters
