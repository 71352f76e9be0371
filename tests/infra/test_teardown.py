"""A failed first deploy can be retried as it is, and the deploying guide lists what stays.

Before (issue 33, item 13): the tasks' schedule group had the fixed name ``<stack>-tasks`` and
``DeletionPolicy: Retain``, so after a rolled-back first deploy or a ``cdk destroy`` the next create
met "already exists"; and each rolled-back attempt left the 7 tables (deletion-protected) and the
13 queues behind. CloudFormation's rules are in ``infra/teardown.py``; the emulator (moto) cannot
show them: its stacks never roll back, and it keeps only ``Retain`` resources on a deletion.

Cost: the session's two synthesized apps (shared); each test well under a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.teardown import REMOVALS, Ending, staying, teardown_markdown
from tests.helpers.stages import PHYSICAL_NAME
from vigil_tools.emulator.template import Synthesized

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deploying.md"
START, END = "<!-- teardown:start -->", "<!-- teardown:end -->"
DATA = ("AWS::DynamoDB::Table", "AWS::SQS::Queue")
PSEUDO = ("AWS::StackName", "AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix")
"""What a name may be built of and still be the same at the next create of the stack."""


@pytest.fixture(params=["synthesized", "staging"])
def app(request: pytest.FixtureRequest) -> Synthesized:
    """The default stage, then a named one: each stage's names are its own."""
    synthesized: Synthesized = request.getfixturevalue(request.param)
    return synthesized


def templates(app: Synthesized) -> list[dict[str, Any]]:
    """The stack's template and its nested stacks' (the shards of jobs and tasks)."""
    return [stack.template for _, stack in app.stacks()]


def fixed(value: Any, resources: set[str]) -> bool:
    """A name the next create of the stack would give again: no reference to a resource of the
    stack (whose generated names and ids are new at each create), only text and pseudo values."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return value["Ref"] in PSEUDO or value["Ref"] not in resources
        if "Fn::GetAtt" in value:
            return False
        return all(fixed(inner, resources) for inner in value.values())
    if isinstance(value, list):
        return all(fixed(inner, resources) for inner in value)
    return True


def test_nothing_that_outlives_its_stack_has_a_fixed_name(app: Synthesized) -> None:
    named = []
    for template in templates(app):
        resources = template["Resources"]
        named += [
            (kept.logical_id, resources[kept.logical_id]["Properties"][PHYSICAL_NAME[kept.type]])
            for kept in staying(template)
            if PHYSICAL_NAME.get(kept.type) in resources[kept.logical_id].get("Properties", {})
            and fixed(
                resources[kept.logical_id]["Properties"][PHYSICAL_NAME[kept.type]],
                set(resources),
            )
        ]
    assert named == []
    # Every type that stays is known to the check (or it could not see a name to refuse)
    assert {kept.type for kept in staying(*templates(app))} <= {
        *PHYSICAL_NAME,
        "AWS::ApiGateway::Account",  # a setting of the account, nameless
    }


def test_a_rolled_back_first_deploy_leaves_only_api_gateways_logging_role(
    app: Synthesized,
) -> None:
    after_rollback = [k.type for k in staying(*templates(app)) if Ending.ROLLBACK in k.after]
    # The role the account's logging setting may already point at (tests/infra/test_stages.py)
    assert sorted(after_rollback) == ["AWS::ApiGateway::Account", "AWS::IAM::Role"]


def test_data_outlives_a_destroy_a_removal_and_a_replacement(app: Synthesized) -> None:
    data = {
        (k, r["Metadata"]["aws:cdk:path"]): r
        for template in templates(app)
        for k, r in template["Resources"].items()
        if r["Type"] in DATA
    }
    assert len(data) == 23  # 8 tables (the registry keyed by name among them) and 15 queues
    for logical_id, resource in data.items():
        assert resource["DeletionPolicy"] == "RetainExceptOnCreate", logical_id
        assert resource["UpdateReplacePolicy"] == "Retain", logical_id
    kept = {(k.logical_id, k.path) for k in staying(*templates(app)) if Ending.DESTROY in k.after}
    assert set(data) <= kept
    # A table CloudFormation may delete (a rolled-back create) cannot be deletion-protected: the
    # rollback would fail on it (ROLLBACK_FAILED) and the retry with it.
    tables = [r for r in data.values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert not any(t["Properties"].get("DeletionProtectionEnabled") for t in tables)


def test_the_deploying_guide_lists_what_stays(synthesized: Synthesized) -> None:
    text = GUIDE.read_text()
    assert START in text and END in text
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    rendered = teardown_markdown(*templates(synthesized))
    assert block == rendered, f"paste between the markers:\n{rendered}"
    assert "| 8 | 0 |" in rendered and "| 15 | 0 |" in rendered  # tables, queues (shards too)


def resource(policy: str | None, kind: str = "AWS::SQS::Queue") -> dict[str, Any]:
    return {"Type": kind, **({"DeletionPolicy": policy} if policy else {})}


def test_each_deletion_policy_stays_after_what_cloudformation_keeps_it_for() -> None:
    template = {
        "Resources": {
            "Plain": resource(None),
            "Deleted": resource("Delete"),
            "KeptOnDestroy": resource("RetainExceptOnCreate"),
            "KeptAlways": resource("Retain"),
        }
    }
    assert {k.logical_id: k.after for k in staying(template)} == {
        "KeptOnDestroy": {Ending.DESTROY},
        "KeptAlways": {Ending.DESTROY, Ending.ROLLBACK},
    }
    assert "| 2 | 1 | `KeptOnDestroy`, `KeptAlways` |" in teardown_markdown(template)


def test_what_the_model_does_not_know_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"Odd: DeletionPolicy 'Snapshot' is none of"):
        staying({"Resources": {"Odd": resource("Snapshot")}})
    unknown = {"Resources": {"Files": resource("Retain", "AWS::EFS::FileSystem")}}
    with pytest.raises(ValueError, match=r"AWS::EFS::FileSystem stays after its stack: add it"):
        teardown_markdown(unknown)
    assert "AWS::EFS::FileSystem" not in REMOVALS
