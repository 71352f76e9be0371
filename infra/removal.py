"""What a stack deletion does to the resources that hold data: kept, unless the stack is a throwaway.

Tables and queues (the job history, the observer registry, idempotency answers, dead letters) are
retained when the stack is deleted, so a mistaken ``cdk destroy`` loses nothing. A stack deployed
with ``-c throwaway=true`` (a test or demo account) deletes them with it. A retained table is also
deletion-protected, so neither a console click nor ``aws dynamodb delete-table`` removes it by
accident (turn the protection off first, on purpose).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from constructs import Construct

THROWAWAY_CONTEXT = "throwaway"
"""``true`` for a test or demo stack: its tables and queues are deleted with it, not retained
(and its tables not deletion-protected)."""


def is_throwaway(scope: Construct) -> bool:
    value = scope.node.try_get_context(THROWAWAY_CONTEXT)
    return str(value).strip().lower() in ("true", "1", "yes")


def data_removal_policy(scope: Construct) -> RemovalPolicy:
    return RemovalPolicy.DESTROY if is_throwaway(scope) else RemovalPolicy.RETAIN


def deletion_protected(policy: RemovalPolicy) -> bool:
    """A table kept when its stack goes is kept from a stray ``DeleteTable`` too."""
    return policy == RemovalPolicy.RETAIN
