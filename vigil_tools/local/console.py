"""``vigil local up``'s console: the same pages at ``http://127.0.0.1:PORT/console``.

Each request invokes the deployed console functions in-process, as the dashboard would: a page
(``GET /console?args=...``) the view function, a button (``POST /console``) the operate
function, with the button's JSON and the form's fields as the dashboard sends them (the buttons
drawn as forms: ``vigil_forms``). A button that asks for confirmation is answered first by a page
of its own (confirm, or back), the console's ``confirmation`` without JavaScript. The acting
principal is the local operator: ``console:local:local``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from werkzeug.wrappers import Request, Response

from vigil.console.controls import ARGS_FIELD, CONFIRM_FIELD, LOCAL_PATH
from vigil.console.markup import Safe, tag

PATH = LOCAL_PATH
CONFIRMED_FIELD = "confirmed"
FORMS_PARAM = "vigil_forms"  # handlers.console_widget.FORMS_PARAM (functions/ is not imported here)
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost"})
"""The host names the console answers to (it listens on 127.0.0.1 only)."""
Invoke = Callable[[str, dict[str, Any]], Any]
"""Invoke a deployed function in-process (the local runtime's ``invoke``): its Invocation."""


class LocalConsole:
    def __init__(self, invoke: Invoke, view_function: str, operate_function: str) -> None:
        self._invoke = invoke
        self.view_function = view_function
        self.operate_function = operate_function

    @classmethod
    def of(cls, invoke: Invoke, lambda_client: Any, names: list[str]) -> LocalConsole | None:
        """The console of a deployed stack whose functions are ``names`` (None: it has none)."""
        roles: dict[str, str] = {}
        for name in names:
            config = lambda_client.get_function_configuration(FunctionName=name)
            variables = (config.get("Environment") or {}).get("Variables", {})
            if variables.get("VIGIL_CONSOLE_ROLE"):
                roles[variables["VIGIL_CONSOLE_ROLE"]] = config["FunctionName"]
        if {"view", "operate"} - set(roles):
            return None
        return cls(invoke, roles["view"], roles["operate"])

    def answer(self, request: Request) -> Response:
        refusal = foreign(request)
        if refusal:
            return _document(tag("p", f"refused: {refusal}"), status=403)
        try:
            if request.method == "POST":
                return self._post(request.form)
            raw = request.args.get(ARGS_FIELD) or json.dumps({"page": "now"})
            return self._page(self.view_function, _args(raw), {})
        except ValueError as bad:
            return _document(tag("p", f"bad request: {bad}"), status=400)

    def _post(self, form: Mapping[str, str]) -> Response:
        args = _args(form.get(ARGS_FIELD, ""))
        fields = {
            k: v for k, v in form.items() if k not in (ARGS_FIELD, CONFIRM_FIELD, CONFIRMED_FIELD)
        }
        question = form.get(CONFIRM_FIELD)
        if question and form.get(CONFIRMED_FIELD) != "yes":
            return _confirmation(question, form)
        return self._page(self.operate_function, args, fields)

    def _page(self, function: str, args: dict[str, Any], fields: dict[str, str]) -> Response:
        event = {
            **args,
            FORMS_PARAM: True,
            "widgetContext": {
                "dashboardName": "local",
                "widgetId": "local",
                "accountId": "local",
                "params": {"page": args.get("page", "now")},
                "forms": {"all": fields},
            },
        }
        done = self._invoke(function, event)
        if not done.ok:
            return _document(
                tag("p", f"the console function failed: {done.error_type}: {done.error_message}"),
                status=502,
            )
        return _document(Safe(str(done.payload)))


def foreign(request: Request) -> str | None:
    """Why a request did not come from the console's own pages (None: it did, or from no
    browser at all). Any web page the operator opens can post a form to the loopback, and a
    host name rebound to 127.0.0.1 makes the browser call its pages same-origin; so the Host
    must name the loopback, and a POST must come from this origin: browsers send ``Origin``
    with every cross-origin POST and ``Sec-Fetch-Site`` with every request (curl and the tests'
    clients send neither)."""
    host = request.host.rsplit(":", 1)[0]
    if host not in LOOPBACK_NAMES:
        return f"host {request.host!r} is not the loopback (the console answers 127.0.0.1 only)"
    if request.method in ("GET", "HEAD"):
        return None
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return f"a form from another site ({site}): press the console's own buttons"
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        return f"a form from another origin ({origin}): press the console's own buttons"
    return None


def _args(raw: str) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("args must be a JSON object")
    return value


def _confirmation(question: str, form: Mapping[str, str]) -> Response:
    hidden = [tag("input", type="hidden", name=k, value=v) for k, v in form.items()]
    page = json.loads(form.get(ARGS_FIELD) or "{}").get("page", "now")
    back = f"{PATH}?{_query({'page': page})}"
    body = tag(
        "div",
        tag("p", question, class_="question"),
        tag(
            "form",
            *hidden,
            tag("input", type="hidden", name=CONFIRMED_FIELD, value="yes"),
            tag("button", "Confirm", type="submit", class_="btn btn-primary", id="confirm"),
            method="post",
            action=PATH,
        ),
        tag("a", "Cancel", href=back, class_="btn"),
        class_="vigil",
    )
    return _document(body)


def _query(args: dict[str, Any]) -> str:
    return urlencode({ARGS_FIELD: json.dumps(args, separators=(",", ":"))})


def _document(body: Safe, status: int = 200) -> Response:
    html = (
        '<!doctype html><html><head><meta charset="utf-8"><title>Vigil console</title>'
        "<style>body{margin:16px;background:#fff}"
        ".btn{display:inline-block;padding:2px 8px;border:1px solid #879596;border-radius:2px;"
        "background:#fafafa;color:#16191f;text-decoration:none;font-size:12px;cursor:pointer}"
        ".btn-primary{background:#ec7211;border-color:#ec7211;color:#fff}"
        "input[type=text]{font-size:12px}</style></head><body>" + body + "</body></html>"
    )
    return Response(html, status=status, content_type="text/html; charset=utf-8")
