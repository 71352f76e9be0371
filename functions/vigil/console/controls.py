"""A button, drawn for where the page is shown.

In the CloudWatch console a button is an element followed by ``<cwdb-action action="call">``
whose content is the JSON the function is invoked with (the docs' "params in JSON"), and whose
``confirmation`` the console asks before invoking; the form fields anywhere in the widget reach
the function as ``widgetContext.forms.all``. A view control (a page, a filter, the next page)
invokes the view function; an action invokes the operate function.

``vigil local up`` serves the same pages to a plain browser, where ``<cwdb-action>`` means
nothing: there a view control is a link (``GET /console?args=...``) and an action a ``<form>``
posting the same JSON (and its own fields); a confirmation is asked by the local server's own
page before the action is sent (no JavaScript).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode

from vigil.console.markup import Safe, join, tag
from vigil.contract.journal import Verdict

LOCAL_PATH = "/console"
ARGS_FIELD = "args"
CONFIRM_FIELD = "confirm"
"""A local form's question: the local server asks it on a page of its own first."""


@dataclass(frozen=True)
class Field:
    """A text field the operator fills in before pressing the button (a pause's reason)."""

    name: str
    placeholder: str


@dataclass(frozen=True)
class Control:
    label: str
    args: dict[str, Any]
    confirm: str | None = None
    """Asked before the action is sent (every destructive action has one)."""
    view: bool = False
    """A page, not an action: the view function draws it."""
    fields: tuple[Field, ...] = field(default_factory=tuple)
    primary: bool = False


def args_json(args: dict[str, Any]) -> str:
    return json.dumps(args, separators=(",", ":"), sort_keys=True)


MARKUP_IN_JSON = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def markup_safe_json(args: dict[str, Any]) -> str:
    """:func:`args_json` with ``<``, ``>`` and ``&`` written as JSON escapes: the console may read
    a ``<cwdb-action>``'s content as text or as markup (``innerHTML`` keeps those three as
    entities), and either way it is then the same JSON, the same arguments."""
    return args_json(args).translate(MARKUP_IN_JSON)


class Controls(Protocol):
    def render(self, control: Control) -> Safe: ...


@dataclass(frozen=True)
class CwdbControls:
    """The console's buttons: ``<cwdb-action>`` invoking the view or the operate function."""

    view_arn: str
    operate_arn: str

    def render(self, control: Control) -> Safe:
        inputs = [
            tag("input", type="text", name=f.name, placeholder=f.placeholder, size=18)
            for f in control.fields
        ]
        button = tag("a", control.label, class_="btn btn-primary" if control.primary else "btn")
        action = tag(
            "cwdb-action",
            markup_safe_json(control.args),  # text content, read back as the same JSON
            action="call",
            endpoint=self.view_arn if control.view else self.operate_arn,
            display="widget",
            confirmation=control.confirm,
        )
        return join([*inputs, button, action])


@dataclass(frozen=True)
class FormControls:
    """``vigil local up``'s buttons: links and forms to its ``/console``."""

    path: str = LOCAL_PATH

    def render(self, control: Control) -> Safe:
        if control.view:
            href = f"{self.path}?{urlencode({ARGS_FIELD: args_json(control.args)})}"
            return tag("a", control.label, href=href, class_="btn")
        inputs = [
            tag("input", type="text", name=f.name, placeholder=f.placeholder, size=18)
            for f in control.fields
        ]
        confirm = (
            tag("input", type="hidden", name=CONFIRM_FIELD, value=control.confirm)
            if control.confirm
            else None
        )
        return tag(
            "form",
            tag("input", type="hidden", name=ARGS_FIELD, value=args_json(control.args)),
            confirm,
            *inputs,
            tag(
                "button",
                control.label,
                type="submit",
                class_="btn btn-primary" if control.primary else "btn",
                data_confirm=control.confirm,
            ),
            method="post",
            action=self.path,
            class_="act",
        )


VERDICTS = (
    (Verdict.DONE, "it happened"),
    (Verdict.DONE_RERUN, "it happened, rerun the rest"),
    (Verdict.NOT_DONE, "it did not happen"),
)
"""The verdicts, as the settle buttons say them."""


def settle_controls(
    controls: Controls, what: str, effect: str, args: dict[str, Any], *, rerun: bool = True
) -> list[Safe]:
    """The settle buttons of an UNCERTAIN run: one per verdict (``rerun``: the done-and-rerun
    one too, which an observer does not have: its next generation always runs again)."""
    return [
        controls.render(
            Control(
                f"settle: {label}",
                {**args, "effect": effect, "verdict": verdict.value},
                confirm=f"Settle {what}, effect {effect}: {label}?",
            )
        )
        for verdict, label in VERDICTS
        if rerun or verdict is not Verdict.DONE_RERUN
    ]
