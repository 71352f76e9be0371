"""The deploying guide's idle cost counts the alarms the app declares today.

The figure was written by hand and drifted with every alarm added; ``make bench`` now writes it
from the synthesized template (``benchmarks/idle_cost.py``), and this test fails when the
template has moved on since, naming the command that rewrites it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.idle_cost import (
    ASSUMED_SECONDS,
    HOURS_A_MONTH,
    LAMBDA_ARM_GB_SECOND,
    LAMBDA_REQUEST,
    METRIC_MONTH,
    XRAY_TRACE,
    Idle,
    counted,
    line,
    measured_rows,
    series_hours,
)
from vigil_tools.emulator.template import Synthesized

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deploying.md"


def test_the_idle_cost_counts_the_dashboards_and_alarms_of_the_template(
    synthesized: Synthesized,
) -> None:
    text = GUIDE.read_text()

    stale = [line(row) for row in counted(synthesized) if line(row) not in text]

    assert stale == [], (
        f"{GUIDE.name} counts other alarms than the app declares: "
        'make bench ARGS="--only idle-cost" rewrites its table'
    )


def emf(metric: str, hour: int, **dimensions: str) -> str:
    """One EMF line as Powertools prints it."""
    return json.dumps(
        {
            "_aws": {
                "Timestamp": hour * 3_600_000 + 1_000,
                "CloudWatchMetrics": [
                    {
                        "Namespace": "Vigil",
                        "Dimensions": [sorted(dimensions)],
                        "Metrics": [{"Name": metric, "Unit": "Count"}],
                    }
                ],
            },
            metric: 1,
            **dimensions,
        }
    )


def test_the_measured_rows_count_series_by_the_hours_they_are_put_and_price_arm64_and_traces(
    tmp_path: Path,
) -> None:
    # Issue 33 item 17: a series put every hour is a whole metric-month (not "~9 fleet series"),
    # Lambda is priced at arm64, and each traced invocation is an X-Ray trace. ~0.01 s.
    lines = [emf("ResyncPass", hour, service="vigil") for hour in range(3)]
    lines += [emf("JobRunSucceeded", 0, service="vigil", job="cleanup")]
    lines += ["not a metric", json.dumps({"level": "INFO", "message": "hello"})]
    (tmp_path / "Vigil_Reconciler.log").write_text("\n".join(lines))
    series = series_hours(tmp_path)
    assert series == {
        ("Vigil", "ResyncPass", "service=vigil"): 3,
        ("Vigil", "JobRunSucceeded", "job=cleanup", "service=vigil"): 1,
    }
    idle = Idle(series, {"Vigil_Reconciler": 180}, {"Vigil_Reconciler": 1024}, hours=3)
    metrics, lambda_row, xray = measured_rows(idle)
    assert "1 series put every hour" in metrics.idle_use and "1 more" in metrics.idle_use
    assert metrics.dollars == pytest.approx((1 + 1 / 3) * METRIC_MONTH)
    invocations = 180 * HOURS_A_MONTH / 3
    assert lambda_row.dollars == pytest.approx(
        invocations * LAMBDA_REQUEST + invocations * ASSUMED_SECONDS * LAMBDA_ARM_GB_SECOND
    )
    assert "arm64" in lambda_row.item
    assert xray.item == "X-Ray" and xray.dollars == pytest.approx(invocations * XRAY_TRACE)
