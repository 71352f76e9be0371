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
from vigil.observers.registry.errors import InvalidCursor
from vigil.tasks.errors import InvalidTask, TaskNotFound

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


PAGE_PARAMS = ("status", "next", "job", "task", "id", "records_next")
"""What the pages read of an invocation besides ``page``: text (a page offset is a number)."""
TOKEN_BYTES = 4096
"""The longest page token (``next``, ``records_next``) read; a name or id: a button's limit."""
DRAW_REFUSALS: tuple[type[Exception], ...] = (
    InvalidListing,
    InvalidTask,
    TaskNotFound,
    InvalidCursor,
)
"""A page token no page printed, a bad filter, a record gone since its link was drawn."""


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
        body = render(read(services, _page_params(params)), controls)  # type: ignore[operator]
    except DRAW_REFUSALS as bad:
        # The page as first drawn; an action's own outcome, when there is one, is what it says.
        outcome = outcome or Outcome(Tone.REFUSED, f"Refused: {bad}")
        body = render(read(services, {"page": name.value}), controls)  # type: ignore[operator]
    return page(name, body, controls, outcome)


def _page_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The page's parameters as text: a forged number becomes text the page refuses plainly,
    anything else (a list, an object) is refused here."""
    shown: dict[str, Any] = {"page": params.get("page")}
    for key in PAGE_PARAMS:
        value = params.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise InvalidListing(key, f"must be text, got {type(value).__name__}")
        text = str(value)
        limit = TOKEN_BYTES if key.endswith("next") else actions.MAX_ARG_BYTES
        if len(text.encode()) > limit:
            raise InvalidListing(key, f"{len(text)} characters, longer than any page offers")
        shown[key] = text
    return shown
