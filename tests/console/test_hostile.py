"""Every page rendered with hostile strings in every name, error, reason and payload: nothing of
them becomes markup, in the console's buttons (``<cwdb-action>``) and the local ones (forms).
Pure rendering, no AWS: about 0.1 s."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.console.markup_check import assert_inert
from vigil.console import jobs_page, now_page, observers_page, tasks_page
from vigil.console.controls import Controls, CwdbControls, FormControls
from vigil.console.frame import Outcome, PageName, Tone, page

HOSTILE = (
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "\"'><svg onload=alert(1)>",
    '</cwdb-action><a href="javascript:alert(1)">x</a>',
)
EVIL = "".join(HOSTILE)
CONTROLS: list[Controls] = [
    CwdbControls(
        "arn:aws:lambda:us-east-1:1:function:view", "arn:aws:lambda:us-east-1:1:function:op"
    ),
    FormControls(),
]


def job_line(name: str) -> jobs_page.JobLine:
    return jobs_page.JobLine(
        name=name,
        state="PAUSED",
        schedule=EVIL,
        next_fire=EVIL,
        last_tick=EVIL,
        last_error=EVIL,
        paused_since=EVIL,
        pause=EVIL,
        dead_letters=3,
    )


def observer_line(name: str) -> observers_page.ObserverLine:
    return observers_page.ObserverLine(
        name=name,
        kind=EVIL,
        status="FAILED",
        desired="RUNNING",
        generation=2,
        heartbeat=EVIL,
        host=EVIL,
        restarts=1,
        last_exit=EVIL,
        reason=EVIL,
        uncertain_effect=EVIL,
    )


def pages(controls: Controls) -> dict[str, str]:
    tick = jobs_page.TickLine(EVIL, "UNCERTAIN", 2, 10, EVIL, EVIL, EVIL, EVIL)
    running = replace(job_line(EVIL), state="FAILED", pause=None)  # its pause button has a field
    lines = [*(job_line(h) for h in HOSTILE), running]
    jobs = jobs_page.JobsView([(EVIL, 1)], lines, EVIL, EVIL, EVIL, [tick])
    record = {
        "id": EVIL,
        "status": "UNCERTAIN",
        "uncertain_effect": EVIL,
        "payload": {EVIL: EVIL},
        "steps": [{"name": EVIL, "status": EVIL}],
    }
    tasks = tasks_page.TasksView(
        [(EVIL, 1)],
        [tasks_page.TaskLine(h, {"FAILED": 2}, 1, 1, 1, 4) for h in HOSTILE],
        5,
        task=EVIL,
        status=EVIL,
        records=[tasks_page.RecordLine(h, "QUEUED", 1, EVIL, EVIL, EVIL) for h in HOSTILE],
        records_next=EVIL,
        record=record,
    )
    observers = observers_page.ObserversView(
        [(EVIL, 1)],
        [observer_line(h) for h in HOSTILE],
        EVIL,
        EVIL,
        [observers_page.HostLine(EVIL, EVIL, EVIL, 1, 2, EVIL)],
        3,
    )
    now = now_page.NowView(
        [job_line(h) for h in HOSTILE],
        4,
        [(h, 2) for h in HOSTILE],
        [observer_line(h) for h in HOSTILE],
        [now_page.AlarmLine(h, EVIL, EVIL) for h in HOSTILE],
    )
    outcome = Outcome(Tone.STALE, EVIL)
    return {
        "jobs": page(PageName.JOBS, jobs_page.render(jobs, controls), controls, outcome),
        "tasks": page(PageName.TASKS, tasks_page.render(tasks, controls), controls, outcome),
        "observers": page(
            PageName.OBSERVERS, observers_page.render(observers, controls), controls, outcome
        ),
        "now": page(PageName.NOW, now_page.render(now, controls), controls, outcome),
    }


@pytest.mark.parametrize("controls", CONTROLS, ids=["console", "local"])
def test_hostile_strings_stay_text_on_every_page(controls: Controls) -> None:
    for name, html in pages(controls).items():
        parsed = assert_inert(html)

        shown = "".join(parsed.text)
        assert all(h in shown for h in HOSTILE), name  # shown as written, as text
        buttons = [a for a in parsed.actions if "action" in a]
        targets = {str(a.get("job") or a.get("task") or a.get("name")) for a in buttons}
        assert set(HOSTILE) <= targets, name  # each button names its hostile target exactly


def test_a_confirmation_and_a_field_carry_hostile_text_as_attribute_values() -> None:
    html = pages(CONTROLS[0])["jobs"]

    parsed = assert_inert(html)
    assert "input" in parsed.tags and "cwdb-action" in parsed.tags
    assert EVIL not in html  # only ever escaped


def test_a_buttons_json_reads_the_same_whether_the_console_takes_its_text_or_its_markup() -> None:
    """How the console reads a ``<cwdb-action>``'s content is not documented: as text (entities
    decoded) or as markup (``innerHTML``, which gives ``<``, ``>`` and ``&`` back as entities).
    With no ``<``, ``>`` or ``&`` in the JSON both readings are the same arguments."""
    import json
    import re

    html = pages(CONTROLS[0])["jobs"]

    contents = re.findall(r"<cwdb-action[^>]*>(.*?)</cwdb-action>", html)
    assert contents
    for content in contents:
        as_markup = content.replace("&quot;", '"').replace("&#x27;", "'")  # innerHTML's view
        assert json.loads(as_markup) == json.loads(html_unescape(content))


def html_unescape(value: str) -> str:
    import html

    return html.unescape(value)
