"""The deploying guide's idle cost counts the alarms the app declares today.

The figure was written by hand and drifted with every alarm added; ``make bench`` now writes it
from the synthesized template (``benchmarks/idle_cost.py``), and this test fails when the
template has moved on since, naming the command that rewrites it.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.idle_cost import counted, line
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
