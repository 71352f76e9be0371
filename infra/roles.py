"""``InlineRole``: a role whose whole policy is inline, one CloudFormation resource instead of two.

Every grant a construct makes (``grant_*``, ``add_to_role_policy``, what a Lambda event source or
destination adds) lands in the role's own ``Policies`` rather than in a ``DefaultPolicy``
resource: per job and per task that is one resource less, and a dependency on the role covers its
permissions (what depends on the policy waits for the role). IAM's quota is the same for both: 10,240
characters of inline policy a role (``infra.quotas``).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_iam as iam
from constructs import Construct

POLICY_NAME = "vigil"


class InlineRole(iam.Role):
    """An ``iam.Role`` whose statements, however granted, go to its one inline policy."""

    def __init__(self, scope: Construct, construct_id: str, **props: Any) -> None:
        document = iam.PolicyDocument()
        super().__init__(scope, construct_id, inline_policies={POLICY_NAME: document}, **props)
        self.document = document

    def add_to_principal_policy(
        self, statement: iam.PolicyStatement
    ) -> iam.AddToPrincipalPolicyResult:
        self.document.add_statements(statement)
        return iam.AddToPrincipalPolicyResult(statement_added=True, policy_dependable=self)

    def add_to_policy(self, statement: iam.PolicyStatement) -> bool:
        self.document.add_statements(statement)
        return True
