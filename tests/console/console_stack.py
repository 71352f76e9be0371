"""The console's two functions on the deployed example app (``vigil_stack``), invoked as the
dashboard invokes them: what the console tests drive."""

from __future__ import annotations

from typing import Any

from tests.console.markup_check import Parsed, assert_inert

WIDGET_CONTEXT = {
    "dashboardName": "Vigil-console-us-east-1",
    "widgetId": "widget-1",
    "accountId": "123456789012",
    "params": {},
    "forms": {"all": {}},
}


def functions(stack: Any) -> dict[str, str]:
    """``{"view": name, "operate": name}``: the stack's console functions."""
    client = stack.account.session.client("lambda")
    found = {}
    for logical_id in stack.account.synth.resources("AWS::Lambda::Function"):
        name = stack.account.physical_id(logical_id)
        config = client.get_function_configuration(FunctionName=name)
        role = (config.get("Environment") or {}).get("Variables", {}).get("VIGIL_CONSOLE_ROLE")
        if role:
            found[role] = name
    return found


def invoke(
    stack: Any, role: str, event: dict[str, Any], forms: dict[str, str] | None = None
) -> str:
    context = {**WIDGET_CONTEXT, "params": {"page": event.get("page", "now")}}
    if forms:
        context["forms"] = {"all": forms}
    done = stack.runtime.invoke(functions(stack)[role], {**event, "widgetContext": context})
    assert done.ok, (done.error_type, done.error_message)
    return str(done.payload)


def page(
    stack: Any, role: str, event: dict[str, Any], forms: dict[str, str] | None = None
) -> Parsed:
    return assert_inert(invoke(stack, role, event, forms))


def said(parsed: Parsed) -> str:
    return " ".join(parsed.text)
