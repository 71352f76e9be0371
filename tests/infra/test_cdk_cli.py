"""``make cdk-synth``: the path a real deploy takes, through the CDK CLI version package.json pins.

The one synth of the suite that runs the CDK's built-in CloudFormation validation (the suite's other
processes turn it off, tests/conftest.py): with cdk.json's ``validateAgainstDefaultRules`` an error
fails this synth, and the CLI's performance counters show the validation ran and found nothing.

The synth goes to this test's own folder (``cdk --output``), never the checkout's ``cdk.out`` that
``make synth`` and a person's own commands share. aws-cdk-lib writes ``performance-counters.json``
only for a synth slower than ``@aws-cdk/core.slowSynthThreshold`` per stack (10 s by default), so
the test sets it to 0: on a quiet machine the synth took under 10 s, the file never came, and the
test failed (issue 33, item 18) whatever folder it read.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.helpers import checkout

ROOT = Path(__file__).resolve().parents[2]


SLOW_SYNTH_THRESHOLD = "@aws-cdk/core.slowSynthThreshold"
"""Milliseconds per stack from which aws-cdk-lib writes its performance counters (10,000 unless set)."""


def test_make_cdk_synth_synthesizes_through_the_pinned_cli(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "CDK_VALIDATION"}
    checkout_before = checkout.snapshot()
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "cdk-synth",
            f"ARGS=--output {tmp_path} --context {SLOW_SYNTH_THRESHOLD}=0",
        ],
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
    template = json.loads((tmp_path / "Vigil.template.json").read_text())
    assert {"AlarmTopicArn", "DashboardName", "CatalogPath"} <= set(template["Outputs"])
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert all(p["violations"] == [] for p in report["pluginReports"])
    counters = json.loads((tmp_path / "performance-counters.json").read_text())["counters"]
    assert counters.get("CloudFormationValidate.validate(cnt)") == 1, counters  # the one stack
    assert counters["CloudFormationValidate.diagnostics"] == 0, counters
    assert checkout.changes(checkout_before, checkout.snapshot()) == []
