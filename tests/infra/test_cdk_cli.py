"""``make cdk-synth``: the path a real deploy takes, through the CDK CLI version package.json pins."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_cdk_synth_synthesizes_through_the_pinned_cli() -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "cdk-synth"],
        cwd=ROOT,
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
    assert {"AlarmTopicArn", "DashboardName", "JobsCatalog"} <= set(template["Outputs"])
    report = json.loads((ROOT / "cdk.out" / "validation-report.json").read_text())
    assert all(p["violations"] == [] for p in report["pluginReports"])
