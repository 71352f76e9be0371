"""``run.fenced.s3``: ``put_object`` that cannot overwrite an object a newer run wrote.

S3 has no condition on metadata, only on the object's existence and its ETag, so a fenced put
reads first: ``head_object`` (the fence is in the object's user metadata) -> a newer run's fence
raises :class:`Fenced` -> else the put, with ``If-Match`` on the ETag just read (or
``If-None-Match: *`` when there was no object). A write that landed between the read and the put
fails the condition (412), as does a delete (404 ``NoSuchKey``), and the read starts over. Cost:
2 requests per fenced put (1 more than a plain put: the head), 2 more per lost race.

The ETag reflects the object's bytes, not its metadata: a put of the very bytes the object holds
would leave it as a superseded run read it, and that run's ``If-Match`` put would land over it.
So such a put changes the object's form instead (AWS documents a multipart upload's ETag as not
the bytes' MD5: it is the MD5 of the parts' MD5s, ending in ``-1`` for one part): the bytes
already there as a single put are written as a one-part upload (create, part, complete: 3
requests where the put was 1), the bytes already there as a one-part upload as a single put.
What no S3 condition can see remains: an object brought back to the very ETag a superseded run
read while it was stalled (A, then B, then A again; or the same bytes twice over, single then
one-part then single). See the effects guide for what is and is not guaranteed.

Lost races to writers that are not newer runs of this scope (another job, a person) are
contention: retried up to :data:`MAX_ROUNDS` times, then :class:`FenceContention`, which fails
the run for its retry (and alarm) instead of ending it FENCED.

A put after a lost race sends the same body again: a file-like ``Body`` is rewound to where the
first put started reading it (one that cannot seek is read once, up front). The author's metadata
cannot name the fence in another case: S3 metadata names are case-insensitive headers.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from vigil.contract.effects import S3_FENCE_METADATA
from vigil.dynamo import error_code
from vigil.effects.fence import FenceContention, GrantedWriter

MAX_ROUNDS = 5
_ABSENT = frozenset({"404", "NoSuchKey", "NotFound"})
_CHANGED = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}) | _ABSENT
"""What a conditional put answers when the object changed (or went) since the head."""
_CHUNK = 1 << 20


@dataclass(frozen=True)
class _Target:
    """What every round of a fenced put writes: the object, its metadata (the fence in it) and
    the author's other arguments."""

    bucket: str
    key: str
    metadata: dict[str, str]
    request: dict[str, Any]


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
        forms = _Forms.of(request.get("Body"), rewind)
        resource = f"s3://{bucket}/{Key}"
        target = _Target(bucket, Key, metadata, request)
        for _ in range(MAX_ROUNDS):
            condition = self._condition(bucket, Key, resource)
            put = self._one_part if forms.unchanged_by_a_put(condition) else self._single
            rewind()
            try:
                return put(target, condition)
            except ClientError as error:
                if error_code(error) not in _CHANGED:
                    raise
        raise FenceContention(
            f"{resource}: changed by another writer (not a newer run of {self._fence.scope}) "
            f"under each of {MAX_ROUNDS} conditional puts; nothing written by this run"
        )

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

    def _single(self, target: _Target, condition: dict[str, str]) -> dict[str, Any]:
        self._check_claim()
        return dict(
            self._client.put_object(
                Bucket=target.bucket,
                Key=target.key,
                Metadata=target.metadata,
                **condition,
                **target.request,
            )
        )

    def _one_part(self, target: _Target, condition: dict[str, str]) -> dict[str, Any]:
        """The put as a one-part multipart upload, completed on the same condition; an upload
        whose completion is refused (or not made) is aborted (best effort: a lifecycle rule
        ends the rest). A strict put reads its claim right before the completion, which is
        what writes the object: read before the upload, a newer run could claim while the part
        is uploaded and the completion would still land."""
        create, part, complete = self._split(target.request)
        where = {"Bucket": target.bucket, "Key": target.key}
        started = self._client.create_multipart_upload(**where, Metadata=target.metadata, **create)
        upload = {**where, "UploadId": started["UploadId"]}
        try:
            uploaded = self._client.upload_part(PartNumber=1, **upload, **part)
            self._check_claim()
            return dict(
                self._client.complete_multipart_upload(
                    MultipartUpload={"Parts": [{"ETag": uploaded["ETag"], "PartNumber": 1}]},
                    **upload,
                    **complete,
                    **condition,
                )
            )
        except BaseException:
            with contextlib.suppress(ClientError):  # the lost race is what the caller must hear
                self._client.abort_multipart_upload(**upload)
            raise

    def _split(
        self, request: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The put's arguments for the upload's three requests, by what each one takes (the
        client's own model says; an argument none of them takes is refused, not dropped)."""
        model = self._client.meta.service_model
        takes = {
            name: set(model.operation_model(name).input_shape.members)
            for name in ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")
        }
        left = set(request) - takes["CreateMultipartUpload"] - takes["UploadPart"]
        if left:
            raise ValueError(
                f"fenced put_object of the bytes the object already holds is a one-part upload, "
                f"which does not take {sorted(left)}"
            )
        return tuple(  # type: ignore[return-value]
            {k: v for k, v in request.items() if k in takes[name]}
            for name in ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")
        )


class _Forms:
    """The two ETags the body can have on S3: put whole (the bytes' MD5) and as a one-part
    upload (the MD5 of that MD5, ``-1``). Unknown (None) for a body this cannot read."""

    def __init__(self, digest: bytes | None) -> None:
        self.single = f'"{digest.hex()}"' if digest is not None else None
        one_part = hashlib.md5(digest, usedforsecurity=False).hexdigest() if digest else None
        self.one_part = f'"{one_part}-1"' if one_part is not None else None

    @classmethod
    def of(cls, body: Any, rewind: Callable[[], None]) -> _Forms:
        digest = hashlib.md5(usedforsecurity=False)
        if body is None:
            return cls(digest.digest())
        if isinstance(body, str):
            body = body.encode()
        if isinstance(body, bytes | bytearray | memoryview):
            digest.update(body)
            return cls(digest.digest())
        if not hasattr(body, "read"):
            return cls(None)
        rewind()
        while chunk := body.read(_CHUNK):
            digest.update(chunk if isinstance(chunk, bytes) else chunk.encode())
        return cls(digest.digest())

    def unchanged_by_a_put(self, condition: dict[str, str]) -> bool:
        """The object holds these bytes, put whole: a single put would leave its ETag as is."""
        return self.single is not None and condition.get("IfMatch") == self.single


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
