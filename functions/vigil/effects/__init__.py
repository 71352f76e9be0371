"""Fenced writes from a run: ``run.fenced`` in a job, ``run.fenced`` in a task, ``ctx.fenced`` in
an observer. Loaded on first use only, so a job that does not write through them pays nothing.

::

    @scheduled_job
    def handler(run):
        table = run.fenced.table("Sessions")           # an alias from writes=[...], or its name
        table.delete_item(Key={"id": {"S": "s-1"}})    # raises Fenced if a newer run wrote it
        run.fenced.s3.put_object(Bucket="Reports", Key="today.csv", Body=b"...")
        run.fenced.sqs.send_message(QueueUrl="Mail", MessageBody="{}", effect="welcome-email")
        with run.once("welcome-email") as first:         # an effect no write can fence
            if first:
                send_email()

How fences are ordered (within one job, one task, one observer): :mod:`vigil.effects.fence`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

from vigil.contract.effects import WriteKind
from vigil.effects.claim import Claim
from vigil.effects.fence import FenceContention, Fenced, Grants, NotGranted, RunFence
from vigil.effects.journal import InvalidEffect, Journal, JournalFull, Uncertain
from vigil.effects.messages import FencedEvents, FencedQueues, SentEffects, deduplication_id
from vigil.effects.objects import FencedObjects
from vigil.effects.table import FencedTable
from vigil.fenced_write import Halt, RunRecordSite

__all__ = [
    "Effects",
    "FenceContention",
    "Fenced",
    "FencedTable",
    "Grants",
    "InvalidEffect",
    "Journal",
    "JournalFull",
    "NotGranted",
    "RunFence",
    "Uncertain",
    "deduplication_id",
]


def clients_of(env: Mapping[str, str]) -> Callable[[str], Any]:
    """Clients in the region ``env`` names: the run's own environment, which for a pooled child
    is its container's, not the host process's ``os.environ``."""

    def client(service: str) -> Any:
        from vigil.persist import write_client

        return write_client(service, env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"))

    return client


class Effects:
    """What ``run.fenced`` is: fenced writers for the resources this run was granted.

    Each resource is checked against the grants before any request (:class:`NotGranted`); each
    AWS client is made on first use and kept for the run."""

    def __init__(
        self,
        fence: RunFence,
        grants: Grants,
        client: Callable[[str], Any] | None = None,
        *,
        halt: Halt | None = None,
        claim: RunRecordSite | None = None,
    ) -> None:
        self.fence = fence
        self._grants = grants
        self._client = client or clients_of(os.environ)
        self._clients: dict[str, Any] = {}
        self._sent = SentEffects()  # one run's sends, across its queues' and buses' writers
        self.halt = halt if halt is not None else Halt()
        """Where a refused write is noted, for the guard, whatever the body does with it."""
        self._claim_site = claim
        self._claim: Claim | None = None
        """Set on :attr:`strict`'s writers only: the claim each of their writes checks."""

    @classmethod
    def from_env(
        cls,
        fence: RunFence,
        env: Mapping[str, str] = os.environ,
        client: Callable[[str], Any] | None = None,
        *,
        halt: Halt | None = None,
        claim: RunRecordSite | None = None,
    ) -> Effects:
        grants = Grants.from_env(env, who=fence.scope)
        return cls(fence, grants, client or clients_of(env), halt=halt, claim=claim)

    @functools.cached_property
    def strict(self) -> Effects:
        """The same writers, each write also checked against the run's own claim: refused once
        a newer run of the scope has claimed, whether or not it wrote there
        (:mod:`vigil.effects.claim`: a DynamoDB write in the same request, a put or a send by a
        read right before it)."""
        if self._claim_site is None:
            raise RuntimeError(
                f"{self.fence.scope}: this run has no claim to check (a run made by hand, not "
                "by a guard): run.fenced.strict needs the record its guard claimed"
            )
        twin = Effects(self.fence, self._grants, self._client, halt=self.halt)
        twin._clients, twin._sent = self._clients, self._sent
        twin._claim = Claim(self._claim_site, self.fence, self.halt)
        return twin

    def _aws(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._client(service)
        return self._clients[service]

    def _resolver(self, kind: WriteKind) -> Callable[[str], str]:
        return lambda name: self._grants.resolve(kind, name)

    def table(self, name: str) -> FencedTable:
        physical = self._grants.resolve(WriteKind.TABLES, name)
        return FencedTable(self._aws("dynamodb"), physical, self.fence, self.halt, self._claim)

    @property
    def s3(self) -> FencedObjects:
        resolve = self._resolver(WriteKind.BUCKETS)
        return FencedObjects(self._aws("s3"), resolve, self.fence, self.halt, self._check)

    @property
    def sqs(self) -> FencedQueues:
        resolve = self._resolver(WriteKind.QUEUES)
        return FencedQueues(
            self._aws("sqs"), resolve, self.fence, self.halt, self._sent, self._check
        )

    @property
    def events(self) -> FencedEvents:
        resolve = self._resolver(WriteKind.BUSES)
        return FencedEvents(
            self._aws("events"), resolve, self.fence, self.halt, self._sent, self._check
        )

    @property
    def _check(self) -> Callable[[], None] | None:
        return self._claim.check if self._claim is not None else None
