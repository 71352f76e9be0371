"""What a stack deletion does to the resources that hold data: kept, unless the stack is a throwaway.

Tables and queues (the job history, the observer registry, idempotency answers, dead letters) are
kept when the stack is deleted, when an update removes them from the template and when an update
replaces them, so a mistaken ``cdk destroy`` or change loses nothing. They are deleted only when the
deploy that created them rolls back (CloudFormation's ``RetainExceptOnCreate``): a failed first
deploy leaves no empty table or queue behind and is retried as it is. A stack deployed with
``-c throwaway=true`` (a test or demo account) deletes them with it. What stays, and how to remove
it: ``infra.teardown`` and docs/guides/deploying.md "Tearing down".
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from constructs import Construct

THROWAWAY_CONTEXT = "throwaway"
"""``true`` for a test or demo stack: its tables and queues are deleted with it, not retained."""
FIXED_NAME_REMOVAL = RemovalPolicy.DESTROY
"""For a resource whose name the template fixes (the tasks' schedule group, ``<stack>-tasks``):
one that outlived its stack would make the stack's next create fail ("already exists"), so it
goes with the stack, on a deletion and on a rolled-back create alike."""


def is_throwaway(scope: Construct) -> bool:
    value = scope.node.try_get_context(THROWAWAY_CONTEXT)
    return str(value).strip().lower() in ("true", "1", "yes")


def data_removal_policy(scope: Construct) -> RemovalPolicy:
    """Kept on deletion, removal and replacement, deleted by a rolled-back create (see the module);
    deleted with a throwaway stack."""
    return (
        RemovalPolicy.DESTROY if is_throwaway(scope) else RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
    )


def deletion_protected(policy: RemovalPolicy) -> bool:
    """Only a table CloudFormation never deletes (``RETAIN``, given explicitly) is protected from
    ``DeleteTable``: CloudFormation cannot delete a protected table either, so the rollback of the
    deploy that created it would fail (``ROLLBACK_FAILED``) and its retry with it."""
    return policy == RemovalPolicy.RETAIN
