"""Example flow: onboard a tenant over days, each step once (:mod:`vigil.tasks.flows`). Declared in
the example stack (``app.py``); run by ``tests/tasks/test_flows.py`` and the kit's tests.

Create the account, provision the tenant's workspace (its storage and database schema), each
undone if the flow fails (the workspace deleted, then the account: reverse order), send the
welcome email once, wait three days with no compute, then wait up to two more days for the
tenant's verification (the application signals ``verified``: ``vigil tasks signal onboard-tenant
<id> verified``), and remind them if it never came. A tenant whose account cannot be activated is
aborted: the workspace and the account are removed again (compensations) and the flow ends
COMPENSATED.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from vigil import telemetry
from vigil.tasks import Abort, SignalTimeout, TaskRun, task

WELCOME_PAUSE = timedelta(days=3)
VERIFY_WITHIN = timedelta(days=2)


def create_account(tenant: str) -> dict[str, Any]:
    telemetry.logger().info("account created", extra={"tenant": tenant})
    return {"account": f"acct-{tenant}"}


def delete_account(created: dict[str, Any]) -> None:
    telemetry.logger().info("account deleted", extra=created)


def provision_workspace(account: str) -> dict[str, Any]:
    telemetry.logger().info("workspace provisioned", extra={"account": account})
    return {"workspace": f"ws-{account}"}


def delete_workspace(provisioned: dict[str, Any]) -> None:
    telemetry.logger().info("workspace deleted", extra=provisioned)


def send(kind: str, account: str) -> dict[str, Any]:
    telemetry.logger().info("email sent", extra={"kind": kind, "account": account})
    return {"sent": kind}


def activate(account: str, plan: str) -> dict[str, Any]:
    if plan == "blocked":
        raise Abort(f"{account}: plan {plan!r} cannot be activated")
    return {"active": account, "plan": plan}


@task
def handler(run: TaskRun, payload: dict[str, Any]) -> dict[str, Any]:
    tenant = str(payload["tenant"])
    created = run.step("create-account", create_account, tenant, compensate=delete_account)
    account = created["account"]
    run.step("provision-workspace", provision_workspace, account, compensate=delete_workspace)
    run.step("activate", activate, account, str(payload.get("plan", "basic")))
    run.step("welcome-email", send, "welcome", account, once=True)
    run.sleep("welcome-pause", WELCOME_PAUSE)
    try:
        verified = run.wait_for("verified", timeout=VERIFY_WITHIN)
    except SignalTimeout:
        run.step("reminder-email", send, "reminder", account, once=True)
        return {"account": account, "verified": False}
    return {"account": account, "verified": True, "by": verified}
