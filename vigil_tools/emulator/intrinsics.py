"""Resolve the CloudFormation intrinsics a CDK template uses, against a deployed emulator stack."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vigil_tools.emulator.deploy import Deployed
from vigil_tools.emulator.template import Synthesized

ArnLookup = Callable[[str, str], str]


class Resolver:
    """Resolves one deployed stack's template; :meth:`nested` gives each nested stack's, sharing
    the clients and the account."""

    def __init__(self, synth: Synthesized, deployed: Deployed, session: Any) -> None:
        self._synth = synth
        self._deployed = deployed
        self._session = session
        self._arns: dict[str, str] = {}
        self._account: str | None = None
        self._clients: dict[str, Any] = {}

    def nested(self, logical_id: str) -> Resolver:
        inner = Resolver(
            self._synth.nested[logical_id], self._deployed.nested[logical_id], self._session
        )
        inner._clients = self._clients
        inner._account = self._account
        return inner

    def every_stack(self) -> list[tuple[Synthesized, Resolver]]:
        """This stack's template and resolver, then each nested stack's, depth first."""
        found: list[tuple[Synthesized, Resolver]] = [(self._synth, self)]
        for logical_id in self._synth.nested:
            if logical_id in self._deployed.nested:
                found += self.nested(logical_id).every_stack()
        return found

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "Ref" in value:
            return self._ref(value["Ref"])
        if "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            if attribute.startswith("Outputs."):
                return self._deployed.nested[logical_id].outputs[attribute.removeprefix("Outputs.")]
            if attribute == "Arn":
                return self.arn(logical_id)
            if attribute == "QueueName":
                return self.arn(logical_id).rsplit(":", 1)[-1]
            raise NotImplementedError(f"Fn::GetAtt {attribute} of {logical_id}")
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(str(self.resolve(p)) for p in parts)
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> str:
        pseudo: dict[str, Callable[[], object]] = {
            "AWS::Region": lambda: self._session.region_name,
            "AWS::Partition": lambda: "aws",
            "AWS::URLSuffix": lambda: "amazonaws.com",
            "AWS::AccountId": self.account_id,
            "AWS::StackName": lambda: self._deployed.stack_name,
        }
        if name in pseudo:
            return str(pseudo[name]())
        if name in self._deployed.parameters:
            return self._deployed.parameters[name]
        return self._deployed.physical_id(name)

    def account_id(self) -> str:
        """Asked once per deploy, not once per ``Ref`` (a template holds about a hundred)."""
        if self._account is None:
            self._account = str(self.client("sts").get_caller_identity()["Account"])
        return self._account

    def client(self, service: str) -> Any:
        """One client per service for the deploy's requests (its lookups, ``complete``'s creates):
        a new client costs more than a request."""
        if service not in self._clients:
            self._clients[service] = self._session.client(service)
        return self._clients[service]

    def arn(self, logical_id: str) -> str:
        if logical_id not in self._arns:
            kind = self._synth.template["Resources"][logical_id]["Type"]
            physical = self._deployed.physical_id(logical_id)
            self._arns[logical_id] = self._lookup(kind, physical)
        return self._arns[logical_id]

    def _lookup(self, kind: str, physical: str) -> str:
        client = self.client
        if kind == "AWS::Lambda::Function":
            return str(
                client("lambda").get_function(FunctionName=physical)["Configuration"]["FunctionArn"]
            )
        if kind == "AWS::SQS::Queue":
            attributes = client("sqs").get_queue_attributes(
                QueueUrl=physical, AttributeNames=["QueueArn"]
            )
            return str(attributes["Attributes"]["QueueArn"])
        if kind == "AWS::IAM::Role":
            return str(client("iam").get_role(RoleName=physical)["Role"]["Arn"])
        if kind == "AWS::DynamoDB::Table":
            return str(client("dynamodb").describe_table(TableName=physical)["Table"]["TableArn"])
        if kind == "AWS::Events::Rule":
            name = physical.split("|")[-1].rsplit("/", 1)[-1]
            return str(client("events").describe_rule(Name=name)["Arn"])
        if physical.startswith("arn:"):
            return physical
        raise NotImplementedError(f"ARN of a {kind}")
