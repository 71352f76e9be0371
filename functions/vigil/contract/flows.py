"""The flows' shared names: a flow is a task whose body calls steps on ``run`` (``run.step``,
``run.sleep``, ``run.wait_for``), journalled one item per step beside the task's record.

The journal of a flow lives in its own partition of the tasks table::

    pk = "TASK#<task>/<id>"   sk = "<step name>"   (one item per step, sleep or wait)

A task's id never holds ``/`` (:data:`vigil.contract.tasks.TASK_ID`) and a task's name never
does, so the partition is the flow's alone, its task's records' Query (``pk = TASK#<task>``)
never reads a step, and ``dynamodb:LeadingKeys`` holds a task's function to ``TASK#<task>`` and
``TASK#<task>/*``. Resuming a flow reads its journal with one Query per 1 MB page, never one
request per step.
"""

from __future__ import annotations

import re
from enum import StrEnum

from vigil.contract.tasks import PK_PREFIX

JOURNAL_SEPARATOR = "/"


def journal_pk(task: str, task_id: str) -> str:
    """The partition of one flow's journal."""
    return f"{PK_PREFIX}{task}{JOURNAL_SEPARATOR}{task_id}"


def journal_pk_pattern(task: str) -> str:
    """The IAM pattern (``StringLike``) of every journal partition of ``task``'s flows."""
    return f"{PK_PREFIX}{task}{JOURNAL_SEPARATOR}*"


STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
STEP_NAME_CHARACTERS = (
    "1 to 100 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
)

MAX_STEPS = 10_000
"""The most steps, sleeps and waits one flow may journal (each its own item: the record never
fills; the bound keeps a resume's read of the journal to a known number of pages)."""
MAX_STEP_RESULT_BYTES = 65_536
"""The largest JSON result a step may record (a task's result's limit). A step's write costs one
write unit per KB of its item: keep results small (a location, an id) for 1 WCU a step."""
MAX_CHILDREN = 1_000
"""The most children one ``run.map`` enqueues: its item keeps the ended children's indexes (a
number set, about 5 KB at 1,000), and each child's end rewrites it (one write unit per KB)."""
MAX_SIGNAL_BYTES = 65_536
"""The largest JSON payload a signal may carry."""


class StepKind(StrEnum):
    STEP = "step"
    SLEEP = "sleep"
    WAIT = "wait"
    MAP = "map"


class StepState(StrEnum):
    DONE = "DONE"
    """The step's result is recorded: every later execution returns it without running."""
    STARTED = "STARTED"
    """A ``once=True`` step's intent: an attempt began it; found without DONE, the flow ends
    UNCERTAIN on ``step:<name>`` rather than running it a second time."""
    FAILED = "FAILED"
    """Its last attempt raised (the error is kept); the task's retry runs it again."""


class StepField(StrEnum):
    """The attributes of a journal item."""

    KIND = "kind"
    NAME = "name"
    SEQ = "seq"
    """The order the body first reached it: the timeline's order."""
    STATE = "state"
    ARGS = "args"
    """A digest of the step's arguments (a name used again with others is refused)."""
    RESULT = "result"
    ATTEMPTS = "attempts"
    STARTED_AT = "started_at"
    FINISHED_AT = "finished_at"
    ERROR = "error"
    UNTIL = "until"
    """A sleep's end, or a wait's timeout."""
    SIGNAL = "signal"
    """A wait's signal payload (JSON), written by ``vigil.tasks.signal``."""
    SIGNAL_KEY = "signal_key"
    """The signal's idempotency key: the same key again counts once; another is refused."""
    SIGNALLED_AT = "signalled_at"
    TIMED_OUT_AT = "timed_out_at"
    """A wait's timeout, decided by one conditional write against its signal: one wins."""
    RESUME = "resume"
    """An armed wait's message body: what a signal sends to wake the flow."""
    COMPENSABLE = "compensable"
    COMPENSATION = "compensation"
    """A compensated step: DONE, or the error its compensation raised."""
    COMPENSATION_ORDER = "compensation_order"
    """The order its compensation ran in among the flow's (1 first): reverse of the steps'."""
    EXPIRES_AT = "expires_at"
    CHILD_TASK = "child_task"
    """A map's children's task."""
    CHILDREN = "children"
    """A map's number of children."""
    ENQUEUED_AT = "enqueued_at"
    """A map's children all enqueued (the enqueue journaled: a re-execution does not send again)."""
    ENDED = "ended"
    """A map's children that have ended (counted once each: ``ENDED_SET``)."""
    ENDED_AT = "ended_at"
    """When a map's latest child ended (the map's end once every child has)."""
    ENDED_SET = "ended_set"
    """The indexes of a map's children that have ended (a number set)."""
    COUNTS = "counts"
    """A map's ended children by final status."""
    QUEUE = "queue"
    """A map's flow's queue: where the last child to end sends ``RESUME``."""
    SETTLED_AT = "settled_at"
    """A ``once=True`` step an operator settled (``vigil tasks settle --effect step:<name>``)."""
    CHILDREN_CANCELLED_AT = "children_cancelled_at"
    """A map whose flow was cancelled: when it cancelled the children that had not ended."""
    CHILDREN_STOP_ASKED = "children_stop_asked"
    """Of those, how many were RUNNING and asked to stop (the rest ended CANCELLED at once)."""


WAKE_AT_ATTRIBUTE = "wake_at"
"""On a SLEEPING or WAITING record: when its wake-up is due (a sleep's end, a wait's timeout)."""
WAITING_FOR_ATTRIBUTE = "waiting_for"
"""On a WAITING record: the name of the wait; a signal's wake-up for it may claim at once."""
RESUME_ATTRIBUTE = "resume"
"""On a SLEEPING or WAITING record: its message body, so a cancel can wake it to compensate."""
