"""The emulator's intrinsics against a deployed stack: what a ``Ref`` costs in requests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from vigil_tools.emulator.deploy import Deployed
from vigil_tools.emulator.intrinsics import Resolver
from vigil_tools.emulator.template import Synthesized


class Session:
    """Counts the clients made and the requests sent (only STS is asked here)."""

    region_name = "eu-west-1"

    def __init__(self) -> None:
        self.clients: Counter[str] = Counter()
        self.requests = 0

    def client(self, service: str) -> Any:
        self.clients[service] += 1
        session = self

        class Sts:
            def get_caller_identity(self) -> dict[str, str]:
                session.requests += 1
                return {"Account": "123456789012"}

        return Sts()


def test_each_pseudo_parameter_and_physical_id_resolves_and_the_account_is_asked_once() -> None:
    """A template's Refs (the deploy's ``complete`` resolves ~100) once made an STS client and
    asked for the account each, even a Ref to a resource: ~100 requests per deploy."""
    session = Session()
    deployed = Deployed("Vigil", {"Queue": "https://queue/q"})
    resolver = Resolver(Synthesized(Path("."), {"Resources": {}}, {}), deployed, session)
    value = {
        "Fn::Join": [
            ":",
            [
                {"Ref": "AWS::Partition"},
                {"Ref": "AWS::Region"},
                {"Ref": "AWS::AccountId"},
                {"Ref": "AWS::StackName"},
                {"Ref": "AWS::URLSuffix"},
                {"Ref": "Queue"},
                {"Ref": "AWS::AccountId"},
            ],
        ]
    }
    for _ in range(3):
        assert resolver.resolve(value) == (
            "aws:eu-west-1:123456789012:Vigil:amazonaws.com:https://queue/q:123456789012"
        )
    assert (session.clients, session.requests) == ({"sts": 1}, 1)
