"""What every page shares: the page links, an action's outcome above the page, the style."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from vigil.console.controls import Control, Controls
from vigil.console.markup import Child, Safe, tag


class PageName(StrEnum):
    NOW = "now"
    JOBS = "jobs"
    TASKS = "tasks"
    OBSERVERS = "observers"


TITLES = {
    PageName.NOW: "What is wrong now",
    PageName.JOBS: "Jobs",
    PageName.TASKS: "Tasks",
    PageName.OBSERVERS: "Observers and hosts",
}


class Tone(StrEnum):
    DONE = "done"
    STALE = "stale"
    REFUSED = "refused"


@dataclass(frozen=True)
class Outcome:
    """What an action did (or why it did nothing), shown above the page it returns to."""

    tone: Tone
    message: str


STYLE = Safe(
    "<style>"
    ".vigil{font-family:Amazon Ember,Helvetica,Arial,sans-serif;font-size:13px;color:#16191f}"
    ".vigil table{border-collapse:collapse;margin:6px 0}"
    ".vigil th,.vigil td{border-bottom:1px solid #e9ebed;padding:3px 6px;text-align:left;"
    "vertical-align:top}"
    ".vigil th{background:#f2f3f3}"
    ".vigil .nav a,.vigil .nav span{margin-right:10px}"
    ".vigil .counts span{display:inline-block;margin-right:14px}"
    ".vigil .bad{color:#d13212;font-weight:bold}"
    ".vigil .warn{color:#8a6100;font-weight:bold}"
    ".vigil .ok{color:#1d8102}"
    ".vigil .outcome{padding:6px;margin:4px 0;border-left:4px solid}"
    ".vigil .outcome-done{border-color:#1d8102;background:#f2fcf3}"
    ".vigil .outcome-stale{border-color:#8a6100;background:#fffce6}"
    ".vigil .outcome-refused{border-color:#d13212;background:#fff0f0}"
    ".vigil form.act{display:inline;margin:0 4px 0 0}"
    ".vigil .btn{margin:1px 4px 1px 0}"
    ".vigil .muted{color:#687078}"
    "</style>"
)

STATE_CLASS = {
    "FAILED": "bad",
    "UNCERTAIN": "bad",
    "MISSED": "bad",
    "LATE": "warn",
    "PAUSED": "warn",
    "STUCK": "bad",
    "LOST": "bad",
    "ALARM": "bad",
    "SUCCEEDED": "ok",
    "RUNNING": "ok",
}


def state(word: str | None) -> Safe:
    """A status word, coloured by what it asks of a person."""
    return tag("span", word or "-", class_=STATE_CLASS.get(word or ""))


def ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "-"
    seconds = int((now - moment).total_seconds())
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"


def page(name: PageName, body: Child, controls: Controls, outcome: Outcome | None = None) -> Safe:
    links = [
        controls.render(Control(TITLES[p], {"page": p.value}, view=True))
        if p is not name
        else tag("span", TITLES[p], class_="btn muted")
        for p in PageName
    ]
    shown = (
        tag("div", outcome.message, class_=f"outcome outcome-{outcome.tone.value}")
        if outcome
        else None
    )
    return tag(
        "div",
        STYLE,
        tag("div", *links, class_="nav"),
        shown,
        tag("h3", TITLES[name]),
        body,
        class_="vigil",
    )


def counts(pairs: list[tuple[str, int]]) -> Safe:
    return tag(
        "div",
        *(tag("span", f"{label}: ", tag("b", str(value))) for label, value in pairs),
        class_="counts",
    )


def more(controls: Controls, label: str, args: Mapping[str, Any] | None) -> Safe | None:
    if not args:
        return None
    shown = {key: value for key, value in args.items() if value is not None}
    return controls.render(Control(label, shown, view=True))
