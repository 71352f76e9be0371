"""Two places where moto's (5.2.1) FIFO queues part from SQS, put right: the kit, ``vigil local
up`` and the soaks must not pass what AWS would fail, nor fail what it would pass.

* **A group's order after its batch timed out.** moto's ReceiveMessage notes the groups in
  flight once, then walks the queue and releases each message whose visibility ran out only as
  it reaches it, noting the groups again: the group's first message is skipped because its
  later ones are still noted in flight, and so on, until the *last* one finds the group free and
  is handed out first. SQS hands the group out in order. Measured: 44 ordering violations in a
  tasks soak on the unpatched emulator, 0 patched. :func:`install` releases every message whose
  visibility ran out before moto's walk begins, so the walk meets the group's head first.
* **Deduplication after a delete.** moto drops a ``MessageDeduplicationId`` only while a message
  with it is still in the queue; SQS drops any message sent with an id it accepted in the last
  five minutes, whatever became of that message. A message received and deleted, then sent again
  (a task enqueued twice a minute apart) was delivered twice by moto, once by SQS.
  :func:`install` keeps, per FIFO queue, the ids accepted in the last five minutes (on moto's
  clock: the kit's simulated one) and answers a send under one of them as SQS does: accepted,
  not enqueued.

Both are fidelity fixes, not speed ones: unlike ``moto_speed`` they apply whatever
``VIGIL_MOTO_AS_IS`` says. ``tests/local/test_moto_sqs_fifo.py`` checks each against SQS's
documented behaviour and pins the moto internals relied on.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DEDUPLICATION_MS = 300_000
"""SQS's deduplication interval: five minutes from the accepted send."""
MEMORY_ATTRIBUTE = "_vigil_deduplication_ids"
"""Where a moto ``Queue`` keeps the ids it accepted in the last five minutes (id -> sent ms)."""

_originals: dict[str, Any] = {}


def install() -> bool:
    """Apply both fixes (once; idempotent)."""
    if _originals:
        return True
    from moto.sqs.models import SQSBackend

    _originals["receive"] = SQSBackend.receive_message
    _originals["send"] = SQSBackend.send_message
    SQSBackend.receive_message = _receive_in_group_order  # type: ignore[method-assign]
    SQSBackend.send_message = _send_deduplicated  # type: ignore[method-assign]
    return True


def uninstall() -> None:
    """Put moto back as it was (the tests of this module show what each fix changes)."""
    if not _originals:
        return
    from moto.sqs.models import SQSBackend

    SQSBackend.receive_message = _originals.pop("receive")  # type: ignore[method-assign]
    SQSBackend.send_message = _originals.pop("send")  # type: ignore[method-assign]


def installed() -> bool:
    return bool(_originals)


def _receive_in_group_order(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
    """moto's receive, after releasing every in-flight message whose visibility ran out."""
    queue = self.get_queue(queue_name)
    if queue.fifo_queue:
        for message in [m for m in queue.pending_messages if m.visible]:
            queue.pending_messages.discard(message)
    return _originals["receive"](self, queue_name, *args, **kwargs)


def _send_deduplicated(
    self: Any,
    queue_name: str,
    message_body: str,
    message_attributes: dict[str, Any] | None = None,
    delay_seconds: int | None = None,
    deduplication_id: str | None = None,
    group_id: str | None = None,
    system_attributes: dict[str, Any] | None = None,
    validate_group_id: bool = True,
) -> Any:
    """moto's send; on a FIFO queue, a duplicate of an id accepted in the last five minutes is
    answered (an id, as SQS answers) and not enqueued."""
    send = _originals["send"]
    arguments = (
        queue_name,
        message_body,
        message_attributes,
        delay_seconds,
        deduplication_id,
        group_id,
        system_attributes,
        validate_group_id,
    )
    queue = self.get_queue(queue_name)
    key = _deduplication_id(queue, message_body, deduplication_id)
    if key is None:
        return send(self, *arguments)
    from moto.core.utils import unix_time_millis

    # moto.sqs.models' own name for it: the clock a soak or the kit may set there.
    accepted = _accepted(queue, _moto_sqs_now(unix_time_millis))
    if key in accepted:
        with _nothing_added(queue):
            return send(self, *arguments)
    message = send(self, *arguments)
    accepted[key] = float(message.sent_timestamp)
    return message


def _moto_sqs_now(default: Any) -> float:
    """Now, in ms, as moto's SQS reads it (a soak may have pointed moto.sqs.models at its
    own clock)."""
    from moto.sqs import models

    return float(getattr(models, "unix_time_millis", default)())


def _deduplication_id(queue: Any, body: str, given: str | None) -> str | None:
    if not queue.fifo_queue:
        return None
    if given:
        return given
    if queue.attributes.get("ContentBasedDeduplication") == "true":
        return hashlib.sha256(body.encode("utf-8")).hexdigest()
    return None


def _accepted(queue: Any, now_ms: float) -> OrderedDict[str, float]:
    """The queue's ids accepted in the last five minutes, oldest first (the older ones dropped:
    sends come in clock order, so the front is always the oldest)."""
    memory: OrderedDict[str, float] | None = getattr(queue, MEMORY_ATTRIBUTE, None)
    if memory is None:
        memory = OrderedDict()
        setattr(queue, MEMORY_ATTRIBUTE, memory)
    while memory:
        oldest = next(iter(memory.values()))
        if now_ms - oldest < DEDUPLICATION_MS:
            break
        memory.popitem(last=False)
    return memory


@contextmanager
def _nothing_added(queue: Any) -> Iterator[None]:
    """moto's send builds and validates the message as it always does; it is not enqueued."""
    queue.add_message = lambda message: None
    try:
        yield
    finally:
        del queue.add_message
