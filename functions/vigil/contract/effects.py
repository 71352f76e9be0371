"""The fenced writes' shared names: the fence a write leaves on what it wrote, and the grants.

A run's fence is one sortable string, ``"<scope>#<number, 20 digits>"`` (see
:mod:`vigil.effects`): written on a DynamoDB item as :data:`FENCE_ATTRIBUTE`, on an S3 object as
the user metadata :data:`S3_FENCE_METADATA`, on an SQS message as a message attribute and on an
event under :data:`EVENT_DETAIL_KEY`. The construct's ``writes=[...]`` names what a run may write
in :data:`WRITES_ENV`; the runtime refuses anything else before any request.
"""

from __future__ import annotations

from enum import StrEnum

FENCE_ATTRIBUTE = "vigil_fence"
"""The attribute a fenced DynamoDB write sets (and its condition reads) on the author's item."""
S3_FENCE_METADATA = "vigil-fence"
"""The user metadata (``x-amz-meta-vigil-fence``) a fenced ``put_object`` sets."""
FENCE_DIGITS = 20
"""A fence's number, zero-padded: 20 digits hold any 64-bit token, so string order is number
order within one scope."""


class MessageAttribute(StrEnum):
    """What a fenced SQS message carries, for a consumer of a standard queue to deduplicate on."""

    RUN = "vigil-run"
    EFFECT = "vigil-effect"
    FENCE = "vigil-fence"


EVENT_DETAIL_KEY = "vigil"
"""A fenced event's ``detail`` gets ``{"vigil": {"run": ..., "effect": ..., "fence": ...}}``."""

WRITES_ENV = "VIGIL_WRITES"
"""JSON ``{"tables": {alias: name}, "buckets": {...}, "queues": {alias: url}, "buses": {...}}``:
the resources the construct granted, by the alias the author uses (the construct id of what was
declared in ``writes=[...]``) and by their physical name."""


class WriteKind(StrEnum):
    TABLES = "tables"
    BUCKETS = "buckets"
    QUEUES = "queues"
    BUSES = "buses"
