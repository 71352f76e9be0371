"""One invocation of a console widget: a page to draw, or a button's action and then its page.

The event is what CloudWatch sends a custom widget (docs: "Details about custom widgets"): the
widget's parameters at the top level and again in ``widgetContext.params``, a button's JSON
(the ``<cwdb-action>``'s content) at the top level, the widget's form fields in
``widgetContext.forms.all``, and ``describe: true`` when the console asks what the widget is.
Nothing in it names the person: the actor recorded is the console, the dashboard and the
account, with the invocation's request id (CloudTrail's Lambda data events, when a trail
records them, name the person behind that Invoke).

``role`` is which function this is: ``view`` draws pages and refuses every action (its role
has no write grant either); ``operate`` acts, then draws the page the button was on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vigil.console import actions, jobs_page, now_page, observers_page, tasks_page
from vigil.console.controls import Controls
from vigil.console.frame import Outcome, PageName, Tone, page
from vigil.console.markup import Safe
from vigil.console.services import ConsoleServices
from vigil.contract.console import Role
from vigil.listing import InvalidListing
from vigil.tasks.errors import InvalidTask

DESCRIPTION = (
    "## Vigil console\n"
    "Vigil's jobs, tasks and observers, with their buttons. Parameters:\n"
    "`page`: `now` (default), `jobs`, `tasks` or `observers`."
)


READERS = {
    PageName.NOW: (now_page.read, now_page.render),
    PageName.JOBS: (jobs_page.read, jobs_page.render),
    PageName.TASKS: (tasks_page.read, tasks_page.render),
    PageName.OBSERVERS: (observers_page.read, observers_page.render),
}


def actor_of(event: Mapping[str, Any], request_id: str) -> str:
    context = event.get("widgetContext") or {}
    account = str(context.get("accountId") or "local")
    dashboard = str(context.get("dashboardName") or "local")
    return f"console:{account}:{dashboard} (request {request_id})"


def answer(
    event: Mapping[str, Any],
    services: ConsoleServices,
    controls: Controls,
    role: Role,
    request_id: str,
    operate_function: str = "the operate function",
) -> str:
    """The widget's HTML (or its description when the console asks)."""
    if event.get("describe"):
        return DESCRIPTION
    context = event.get("widgetContext") or {}
    params = {**(context.get("params") or {}), **event}
    forms = (context.get("forms") or {}).get("all") or {}
    outcome = None
    if params.get("action"):
        if role is not Role.OPERATE:
            outcome = Outcome(
                Tone.REFUSED,
                f"Refused: {params.get('action')} is an action, and this is the console's view "
                f"function, which only draws pages. Acting needs lambda:InvokeFunction on "
                f"{operate_function}: nothing was done.",
            )
        else:
            outcome = actions.act(services, params, forms, actor_of(event, request_id), request_id)
    return draw(params, services, controls, outcome)


def draw(
    params: Mapping[str, Any],
    services: ConsoleServices,
    controls: Controls,
    outcome: Outcome | None = None,
) -> Safe:
    raw = str(params.get("page") or PageName.NOW.value)
    name = PageName(raw) if raw in {p.value for p in PageName} else PageName.NOW
    read, render = READERS[name]
    try:
        body = render(read(services, params), controls)  # type: ignore[operator]
    except (InvalidListing, InvalidTask) as bad:  # a stale page token, a bad filter
        outcome = Outcome(Tone.REFUSED, f"Refused: {bad}")
        body = render(read(services, {"page": name.value}), controls)  # type: ignore[operator]
    return page(name, body, controls, outcome)
