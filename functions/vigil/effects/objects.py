"""``run.fenced.s3``: ``put_object`` that cannot overwrite an object a newer run wrote.

S3 has no condition on metadata, only on the object's existence and ETag, so a fenced put reads
first: ``head_object`` (the fence is in the object's user metadata) -> a newer run's fence raises
:class:`Fenced` -> else ``put_object`` with ``If-Match`` on the ETag just read (or ``If-None-Match:
*`` when there was no object). A write that landed between the read and the put fails the
condition (412) and the read starts over. Cost: 2 requests per fenced put (1 more than a plain
put: the head), 2 more per lost race.

A put after a lost race sends the same body again: a file-like ``Body`` is rewound to where the
first put started reading it (one that cannot seek is read once, up front). The author's metadata
cannot name the fence in another case: S3 metadata names are case-insensitive headers.
"""

from __future__ import annotations

from collections.abc import Callable
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
        authors = request.pop("Metadata", None) or {}
        metadata = {k: v for k, v in authors.items() if k.lower() != S3_FENCE_METADATA}
        metadata[S3_FENCE_METADATA] = self._fence.value
        rewind = _rewinder(request)
        resource = f"s3://{bucket}/{Key}"
        for _ in range(MAX_ROUNDS):
            condition = self._condition(bucket, Key, resource)
            rewind()
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
            raise self._refused(resource, found)
        return {"IfMatch": head["ETag"]}


def _rewinder(request: dict[str, Any]) -> Callable[[], None]:
    """What puts ``request``'s Body back as the first put found it, before each put."""
    body: Any = request.get("Body")
    if not hasattr(body, "read"):
        return lambda: None  # bytes or str: sent whole every time
    seek, tell = getattr(body, "seek", None), getattr(body, "tell", None)
    seekable = getattr(body, "seekable", lambda: seek is not None and tell is not None)
    if seek is not None and tell is not None and seekable():
        start = tell()
        return lambda: seek(start)
    request["Body"] = body.read()  # a stream read once is kept for a second put
    return lambda: None
