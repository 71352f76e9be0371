"""Results too big to keep on a task's record: in the stack's results bucket, by reference.

A result over ``RESULT_INLINE_BYTES`` (4 KiB of JSON) is written, before the finish, to
``s3://<bucket>/<task>/<digest of the id>/<token>.json``; the finish records that location
(``result_ref``) instead of the result, so the record stays about 1 KB (three write units for the
whole task, one for each later duplicate). ``get`` (the API, the CLI, the kit) reads it back; the
completion event carries the location. The key holds the run's token, so a run that is fenced
after writing its result leaves an object no record names (the bucket's lifecycle, the task's
retention, removes it), and a retry of the same finish writes the same object again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from vigil.dynamo import error_code

S3_SCHEME = "s3://"
_GONE = frozenset({"NoSuchKey", "404", "NotFound", "NoSuchBucket"})
_REFUSED = frozenset({"AccessDenied", "403", "Forbidden"})


class ResultUnavailable(LookupError):
    """A record's result location that cannot be answered: gone from the bucket (its lifecycle
    rule counts from the object's creation, DynamoDB's TTL deletes a record up to days after its
    ``expires_at``), refused, or not the task's own."""


def result_key(task: str, task_id: str, token: int) -> str:
    """The object of one run's result. The id is digested: it may hold characters S3 advises
    against in keys (``#``), and the record, not the key, is how a result is found."""
    return f"{result_prefix(task, task_id)}{token}.json"


def result_prefix(task: str, task_id: str) -> str:
    """Where every run of one task id writes its result, and the only place its record may
    point (a record's writer cannot make a reader serve another task's result)."""
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:32]
    return f"{task}/{digest}/"


def parse_ref(ref: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); ``ValueError`` for anything else."""
    if not ref.startswith(S3_SCHEME) or "/" not in ref[len(S3_SCHEME) :]:
        raise ValueError(f"not a result location: {ref!r}")
    bucket, key = ref[len(S3_SCHEME) :].split("/", 1)
    return bucket, key


class ResultStore:
    """The results bucket's two requests: PutObject (the task's function), GetObject (readers).
    ``s3`` is a client, or a function making one on first use (a task that never returns a big
    result never builds it)."""

    def __init__(self, s3: Any | Callable[[], Any], bucket: str = "") -> None:
        self._s3 = s3
        self.bucket = bucket

    @property
    def client(self) -> Any:
        if callable(self._s3) and not hasattr(self._s3, "put_object"):
            self._s3 = self._s3()
        return self._s3

    def put(self, task: str, task_id: str, token: int, text: str) -> str:
        """Store one run's result (JSON text); its location."""
        key = result_key(task, task_id, token)
        self.client.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=text.encode(),
            ContentType="application/json",
            Metadata={"task": task, "token": str(token)},
        )
        return f"{S3_SCHEME}{self.bucket}/{key}"

    def read(self, task: str, task_id: str, ref: str) -> Any:
        """The result of ``task`` ``task_id`` stored at ``ref``, as the task returned it;
        :class:`ResultUnavailable` saying why not (other faults, a throttle, propagate)."""
        try:
            bucket, key = parse_ref(ref)
        except ValueError as bad:
            raise ResultUnavailable(str(bad)) from None
        if not key.startswith(result_prefix(task, task_id)):
            raise ResultUnavailable(f"{ref} is not this task's result location: not read")
        try:
            body = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as error:
            code = error_code(error)
            if code in _GONE:
                raise ResultUnavailable(
                    f"the result at {ref} is no longer in the results bucket (expired by its "
                    "lifecycle rule, or deleted)"
                ) from None
            if code in _REFUSED:
                raise ResultUnavailable(
                    f"reading the result at {ref} was refused ({code})"
                ) from None
            raise
        return json.loads(body)
