"""EventBridge scheduled rules, emulated: which deployed rules fire, and the event they deliver.

moto keeps the rules (CloudFormation creates them) but fires none; a local runner reads their
expressions back and delivers the "Scheduled Event" AWS documents to each target.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vigil.clock import iso_seconds


@dataclass(frozen=True)
class ScheduledRule:
    name: str
    arn: str
    expression: str
    targets: tuple[str, ...]
    """The targets' ARNs."""


def scheduled_rules(session: Any) -> list[ScheduledRule]:
    """The enabled rules that run on a schedule, with their targets."""
    events = session.client("events")
    rules = []
    for rule in events.list_rules()["Rules"]:
        if "ScheduleExpression" not in rule or rule.get("State", "ENABLED") != "ENABLED":
            continue
        targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
        rules.append(
            ScheduledRule(
                name=rule["Name"],
                arn=rule["Arn"],
                expression=rule["ScheduleExpression"],
                targets=tuple(t["Arn"] for t in targets),
            )
        )
    return rules


def scheduled_event(rule_arn: str, at: datetime) -> dict[str, Any]:
    """The event a scheduled rule delivers to its targets at ``at``."""
    _, _, _, region, account, _ = rule_arn.split(":", 5)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": iso_seconds(at),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }
