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

S3_SCHEME = "s3://"


def result_key(task: str, task_id: str, token: int) -> str:
    """The object of one run's result. The id is digested: it may hold characters S3 advises
    against in keys (``#``), and the record, not the key, is how a result is found."""
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:32]
    return f"{task}/{digest}/{token}.json"


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

    def read(self, ref: str) -> Any:
        """The result stored at ``ref``, as the task returned it."""
        bucket, key = parse_ref(ref)
        body = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        return json.loads(body)
