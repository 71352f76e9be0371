"""The error codes of Vigil's management APIs (jobs control, observers, tasks): one set, one scheme.

Every refusal answers ``{"error": code, "message": ...}`` (``vigil.http_answers``), and ``code`` is
one of these, named by one scheme a client can rely on:

* ``invalid_<field>`` (422; 400 only for ``invalid_json``): a value the request itself carries,
  named as the client sends it: the body's field, the path or query parameter, the header in
  snake case (``invalid_delay_seconds``, ``invalid_status``, ``invalid_idempotency_key``).
  ``invalid_body`` is the body as a whole. A domain error about a value names the same field as
  the validation of that value would (:func:`invalid`), so one field has one code.
* ``<thing>_not_found`` (404): what the path names does not exist.
* a state the request met, named for the state (409: ``job_paused``, ``not_cancellable``, ``not_settleable``; 429:
  ``fleet_full``; 503: ``enqueued_unrecorded``, ``registry_migrating``).
* ``idempotency_key_reused`` (422) and ``request_in_progress`` (409): the ``Idempotency-Key`` of a
  POST, as the IETF draft "The Idempotency-Key HTTP Header Field" answers them, on every API.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

INVALID_PREFIX = "invalid_"
INVALID_FIELD = "invalid_<field>"
"""An error table's code for a domain error carrying its ``field``: :func:`invalid` of it."""


class ErrorCode(StrEnum):
    """Every code other than ``invalid_<field>``; the routes' OpenAPI names the fields."""

    # The request as a whole.
    INVALID_JSON = "invalid_json"
    """400: the body is not JSON."""
    INVALID_BODY = "invalid_body"
    """422: the body is JSON but not the object the route takes."""
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    NO_SUCH_ROUTE = "no_such_route"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    """422: the ``Idempotency-Key`` was used before with a different body; nothing was done."""
    REQUEST_IN_PROGRESS = "request_in_progress"
    """409: the first request under this ``Idempotency-Key`` has not answered yet; retry."""
    # Jobs control.
    JOB_NOT_FOUND = "job_not_found"
    TICK_NOT_FOUND = "tick_not_found"
    JOB_PAUSED = "job_paused"
    NOT_PAUSED = "not_paused"
    PAUSE_CHANGED = "pause_changed"
    # Observers.
    OBSERVER_NOT_FOUND = "observer_not_found"
    OBSERVER_EXISTS = "observer_exists"
    KIND_NOT_FOUND = "kind_not_found"
    UNKNOWN_KIND = "unknown_kind"
    """422: a body's or query's kind that the fleet does not run (the message names those it does)."""
    NOT_POOLED = "not_pooled"
    NOTHING_TO_REBALANCE = "nothing_to_rebalance"
    FLEET_FULL = "fleet_full"
    VERSION_CONFLICT = "version_conflict"
    NOT_SETTLEABLE = "not_settleable"
    """409: a settlement refused: the observer is not uncertain on that effect, still has its
    task, or moved to another generation meanwhile (the message says which); nothing changed."""
    REGISTRY_MIGRATING = "registry_migrating"
    """503: an upgrade's copy of the registry keyed by name is not done yet: retry shortly."""
    # Tasks.
    TASK_NOT_FOUND = "task_not_found"
    """404: no task of that name (the message names the tasks there are)."""
    TASK_ID_NOT_FOUND = "task_id_not_found"
    NOT_CANCELLABLE = "not_cancellable"
    SIGNAL_REFUSED = "signal_refused"
    """409: the flow has ended, its wait timed out, or the name was signalled under another key."""
    ENQUEUED_UNRECORDED = "enqueued_unrecorded"
    """503: the task's message was sent, its record not written: retry with the id as its key."""


_FIELD = re.compile(r"^[a-z][a-z0-9_]*$")


def invalid(field: str) -> str:
    """The code of an invalid ``field`` (``delay_seconds``, ``Idempotency-Key``...)."""
    return f"{INVALID_PREFIX}{field.replace('-', '_').lower()}"


def documented(code: str, fields: Iterable[str] = ()) -> bool:
    """Whether a route whose request carries ``fields`` may answer ``code``: one of
    :class:`ErrorCode`, or ``invalid_<field>`` for one of its fields."""
    if code in ErrorCode.__members__.values():
        return True
    return code in {invalid(field) for field in fields} and bool(
        _FIELD.match(code.removeprefix(INVALID_PREFIX))
    )
