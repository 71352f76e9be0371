"""``run.fenced.s3``: ``put_object`` that cannot overwrite an object a newer run wrote.

S3 has no condition on metadata, only on the object's existence and ETag, so a fenced put reads
first: ``head_object`` (the fence is in the object's user metadata) -> a newer run's fence raises
:class:`Fenced` -> else ``put_object`` with ``If-Match`` on the ETag just read (or ``If-None-Match:
*`` when there was no object). A write that landed between the read and the put fails the
condition (412) and the read starts over. Cost: 2 requests per fenced put (1 more than a plain
put: the head), 2 more per lost race.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from vigil.contract.effects import S3_FENCE_METADATA
from vigil.dynamo import error_code
from vigil.effects.fence import Fenced, GrantedWriter

MAX_ROUNDS = 3
_ABSENT = frozenset({"404", "NoSuchKey", "NotFound"})
_CHANGED = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})


class FencedObjects(GrantedWriter):
    """``put_object`` on granted buckets (the client's own arguments)."""

    def put_object(self, *, Bucket: str, Key: str, **request: Any) -> dict[str, Any]:
        bucket = self._resolve(Bucket)
        if "IfMatch" in request or "IfNoneMatch" in request:
            raise ValueError("fenced put_object sets IfMatch/IfNoneMatch itself")
        metadata = {**(request.pop("Metadata", None) or {}), S3_FENCE_METADATA: self._fence.value}
        resource = f"s3://{bucket}/{Key}"
        for _ in range(MAX_ROUNDS):
            condition = self._condition(bucket, Key, resource)
            try:
                return dict(
                    self._client.put_object(
                        Bucket=bucket, Key=Key, Metadata=metadata, **condition, **request
                    )
                )
            except ClientError as error:
                if error_code(error) not in _CHANGED:
                    raise
        raise Fenced(resource, self._fence.value, None)

    def _condition(self, bucket: str, key: str, resource: str) -> dict[str, str]:
        try:
            head = self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as error:
            if error_code(error) in _ABSENT:
                return {"IfNoneMatch": "*"}
            raise
        found = (head.get("Metadata") or {}).get(S3_FENCE_METADATA)
        if self._fence.superseded_by(found):
            raise Fenced(resource, self._fence.value, found)
        return {"IfMatch": head["ETag"]}
