"""The stack's dashboard opens on what is failing now (issue 29, "operators at scale"): right
under its heading, the jobs and the tasks with the most failures, most first, at most
``FAILING_NOW`` each, whatever the number of jobs and tasks. Reads the suite's one synthesized
app (milliseconds)."""

from __future__ import annotations

from tests.helpers.monitoring import dashboard_widgets
from vigil_tools.emulator.template import Synthesized


def test_the_first_row_under_the_heading_is_what_is_failing_now(
    synthesized: Synthesized,
) -> None:
    widgets = dashboard_widgets(synthesized)
    heading, *rest = sorted(widgets, key=lambda w: (w["y"], w["x"]))
    assert heading["type"] == "text" and "What is failing now" in heading["properties"]["markdown"]
    first_row = [w for w in rest if w["y"] == rest[0]["y"]]
    titles = [w["properties"]["title"] for w in first_row]
    assert titles[:2] == [
        "jobs failing now (the 10 most, per metric)",
        "tasks failing now (the 10 most, per metric)",
    ]
    for widget in first_row[:2]:
        queries = [m[0]["expression"] for m in widget["properties"]["metrics"]]
        assert queries and all(
            q.endswith("ORDER BY SUM() DESC LIMIT 10") and "GROUP BY" in q for q in queries
        )
