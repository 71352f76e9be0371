"""``run.fenced.strict``: the run's own claim, checked with each write.

A plain fenced write compares with the item's last writer: a superseded run's write is refused
once a newer run of its scope wrote that very item, and lands until then. A strict write is
refused as soon as a newer run has *claimed*, wherever it wrote:

* DynamoDB: the write and a ``ConditionCheck`` of the run's claim in one ``TransactWriteItems``
  (one request, as before; transactional, so each item costs twice the write units);
* S3, SQS, EventBridge, which take no condition on another resource: one strongly consistent
  ``GetItem`` of the claim right before the request. What remains is the time between that read's
  answer and the request's arrival: a run frozen exactly there still writes once.

The claim is the record that orders the runs of the scope: a job's ``HEAD`` (its fence: every
claim of any of its ticks advances it, so under ``overlap="allow"`` a later tick's claim
supersedes an earlier tick's strict writes), a task's record (its token, still RUNNING), an
observer's registry record (its generation).
"""

from __future__ import annotations

from typing import Any

from vigil.dynamo import Item, Update, from_wire, to_wire
from vigil.effects.fence import RunFence, refused
from vigil.fenced_write import Halt, RunRecordSite
from vigil.persist import persist


class Claim:
    """The run's claim (:class:`RunRecordSite`), as a strict writer checks it."""

    def __init__(self, site: RunRecordSite, fence: RunFence, halt: Halt) -> None:
        self.site = site
        self._fence = fence
        self._halt = halt

    def condition_check(self) -> dict[str, Any]:
        """The transaction item that holds only while the run still holds its claim."""
        request = self.site.while_held(Update(), starting=True).request()
        request.pop("UpdateExpression", None)
        return {
            "ConditionCheck": {
                "TableName": self.site.table,
                "Key": to_wire(self.site.key),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **request,
            }
        }

    def refused(self, seen: Item | None) -> Exception:
        """The refusal of a write because ``seen`` (the claim as found) is a newer run's, or
        (a task) asked to be cancelled; noted on the run's halt."""
        cancelled = self.site.cancelled(seen)
        if cancelled is not None:
            self._halt.note(cancelled)
            return cancelled
        newer = (seen or {}).get(self.site.token_attribute)
        resource = f"{self.site.label} (the run's claim)"
        return refused(self._halt, resource, self._fence, None if newer is None else str(newer))

    def check(self) -> None:
        """One strongly consistent read of the claim (through transient faults); ``Fenced`` if a
        newer run holds it."""
        site = self.site
        names = {"#t": site.token_attribute, "#s": "status"}
        if site.cancel is not None:
            names["#c"] = site.cancel.attribute
        answer = persist(
            lambda: site.client.get_item(
                TableName=site.table,
                Key=to_wire(site.key),
                ConsistentRead=True,
                ProjectionExpression=", ".join(names),
                ExpressionAttributeNames=names,
            ),
            time_left_s=site.time_left_s,
            sleep=site.sleep,
        )
        seen = from_wire(answer.get("Item"))
        if not site.holds(seen) or site.cancelled(seen) is not None:
            raise self.refused(seen)
