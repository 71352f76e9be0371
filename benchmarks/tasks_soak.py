"""A chaos soak of tasks: thousands of tasks under seeded faults, checked by an independent ledger.

The real ``@task`` handler (``vigil.tasks.task``: Powertools' batch processing, the guard, the
store, persist), ``enqueue``/``cancel`` (``vigil.tasks.enqueue.TaskClient``) and the operator's
``redrive`` (``vigil.tasks.redrive``) run on the emulator's moto (its SQS, with
``vigil_tools.emulator.moto_sqs_fifo``'s FIFO fixes, DynamoDB, S3), under a simulated clock that
moto's SQS reads too, so visibility timeouts, backoffs, FIFO groups and the redrive policy act on
simulated time. The event source is played as Lambda's SQS mapping plays it (receive up to the
batch size with the queue's visibility timeout, invoke, delete what the function did not report
failed), with containers that stay warm, each with its own guard and a small clock skew; an
invocation past its deadline is killed (its stack unwound without another request, its answer
lost, the batch left to its visibility).

Two tasks: ``plain`` (a standard queue) and ``ordered`` (FIFO, 40 groups), 70/30, retries 3,
every outcome announced. Each task has a fate: most succeed, some fail their first attempts,
some always fail (poison), some fail until the operator's first redrive (healed), some return a
result over 4 KiB (the results bucket). After the main phase the operator redrives both
dead-letter queues twice (``vigil tasks redrive``), and the stranded-tasks audit runs.

Faults (``--faults``, all by default):

``duplicate``     SQS hands a copy of a message (same id) to another invocation meanwhile (a
                  standard queue's at-least-once delivery; FIFO queues hand out none)
``lapse``         a message's visibility lapses while its run goes on (another poll takes it)
``throttle``      a write throttled past botocore's retries: the claim, the finish, progress,
                  the dead-letter send, ChangeMessageVisibility, PutEvents, the results PUT,
                  the enqueue's send and record, cancel
``applied-error`` a DynamoDB write applied, its answer lost (a timeout or a 500)
``kill``          an invocation killed at a random request (before or after it is applied),
                  between the finish and PutEvents, or by a run that hangs past the deadline
``delete``        the event source's delete of a finished message fails (it comes back)
``enqueue-twice`` a key enqueued twice at once, and again hours later
``cancel``        cancels racing the runs
``skew``          each container's clock off by up to 5 s (the lease margin is 10 s)

What is counted does not come from Vigil's records: each body that does its work writes to a
sink that accepts a write only with a fencing token above the last it accepted for that task; the
ledger keeps every body's start and end (and its group's order of sends), the redrive operations
that moved each task, and every completion event sent. At the end the records are compared with
it. Targets: 0 lost, 0 unexplained second bodies, 0 runs beyond ``(retries + 1) x (1 +
redrives)``, 0 completion events missing or sent twice with different content, 0 group overlaps
or out-of-order runs, 0 runs after a cancel, 0 records that disagree with the ledger.

    python -m benchmarks.tasks_soak --tasks 10000 --seed 1 [--faults a,b] [--broken-guard]

``--broken-guard`` removes the claim's condition (any claim wins): the counters must catch it.
``--fifo-as-moto`` runs on moto's FIFO queues as they are (without the emulator's fixes).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import resource
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from benchmarks.chaos_soak import (
    Killed,
    Simulation,
    positive,
    quiet_telemetry,
    seed_and_faults,
    to_stderr,
    verdict,
)
from benchmarks.tasks_ledger import (
    Invocation,
    Ledger,
    Report,
    Run,
    cause,
    disagrees,
    events_of,
    group_checks,
    table,
)
from tests.helpers.clients import Delegating
from tests.helpers.jobs import throttled
from tests.helpers.tables import create_tasks_table
from vigil.clock import ManualClock
from vigil.contract.tasks import CompletionEvents, TaskStatus, max_receive_count
from vigil.dynamo import paginate
from vigil.tasks import decorator
from vigil.tasks.audit import audit
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.errors import EnqueuedUnrecorded, NotCancellable
from vigil.tasks.queues import TaskQueue
from vigil.tasks.redrive import redrive
from vigil.tasks.settings import TaskSettings
from vigil.tasks.store import TaskStore
from vigil_tools.emulator.queue_mappings import _receivable_at, batch_item_failures
from vigil_tools.lambda_context import LambdaContext
from vigil_tools.sqs_event import sqs_records

FAULTS = (
    "duplicate",
    "lapse",
    "throttle",
    "applied-error",
    "kill",
    "delete",
    "enqueue-twice",
    "cancel",
    "skew",
)
START = datetime(2026, 11, 22, tzinfo=UTC)
SPACING = timedelta(seconds=2)
"""Between two enqueues: a steady flow, the queues shallow (moto's receive walks the queue)."""
PLAIN, ORDERED = "plain", "ordered"
ORDERED_SHARE = 0.3
GROUPS = 40
RETRIES = 3
BACKOFF = timedelta(seconds=10)
TIMEOUT = timedelta(seconds=30)
LEASE_MARGIN = timedelta(seconds=10)
VISIBILITY_S = 6 * int(TIMEOUT.total_seconds())
BATCH = 10
CONCURRENCY = 4
POLL = timedelta(seconds=1)
REDRIVES = 2
TABLE = "vigil-tasks"
BUCKET = "vigil-task-results"
BIG_RESULT = 6_000
"""Bytes of a big result: over ``RESULT_INLINE_BYTES``, so it goes to the results bucket."""
FATES = {"ok": 0.85, "flaky": 0.07, "poison": 0.03, "healed": 0.02, "big": 0.03}
"""How tasks end: ok; flaky fails its first one or two attempts; poison always fails; healed fails
until the operator's first redrive; big returns a result over 4 KiB."""
RATES = {
    "duplicate": 0.02,  # per message received: a copy to another invocation
    "lapse": 0.02,  # per run: its message visible again while it runs
    "throttle": 0.015,  # per write
    "applied-error": 0.008,  # per DynamoDB write
    "kill": 0.002,  # per request of the function: the invocation dies there
    "kill-event": 0.03,  # per PutEvents: the invocation dies between the finish and it
    "hang": 0.004,  # per run: it hangs past the deadline
    "delete": 0.02,  # per message the event source deletes
    "enqueue-twice": 0.05,  # per task: a second enqueue of its key at once
    "again-later": 0.03,  # per task: its key again 2 to 6 hours later
    "cancel": 0.03,  # per task: a cancel within seconds of the enqueue
    "delay": 0.05,  # per plain task: a delay of up to a minute
    "progress": 0.2,  # per run: a progress note
}
MAX_SKEW_S = 5.0
PROGRESS_EVERY = 1_000
WRITES = {
    "dynamodb": frozenset({"update_item", "put_item"}),
    "sqs": frozenset({"send_message", "change_message_visibility"}),
    "events": frozenset({"put_events"}),
    "s3": frozenset({"put_object"}),
}
THROTTLE = {
    "dynamodb": ("ProvisionedThroughputExceededException", 400),
    "sqs": ("RequestThrottled", 403),
    "events": ("ThrottlingException", 400),
    "s3": ("SlowDown", 503),
}


# --- the ledger: what happened, kept apart from Vigil's records --------------------------------


# --- clients with faults --------------------------------------------------------------------------


class Faulty(Delegating):
    """A client of ``service`` with the soak's faults on its writes; ``kills``: a function's
    client, whose invocation may die at any request (and cannot make one past its deadline)."""

    def __init__(self, client: Any, soak: TasksSoak, service: str, kills: bool) -> None:
        super().__init__(client)
        self._soak, self._service, self._kills = soak, service, kills

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name.startswith("_") or not callable(attribute) or name in ("meta", "exceptions"):
            return attribute

        def call(**kwargs: Any) -> Any:
            return self._soak.call(self._service, name, attribute, kwargs, kills=self._kills)

        return call


class EventSink:
    """EventBridge as the subscribers see it: every entry PutEvents took, kept in the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        for entry in Entries:
            detail = json.loads(entry["Detail"])
            self._ledger.events[detail["id"]].append(
                (str(detail.get("event_id")), json.dumps(detail, sort_keys=True))
            )
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in Entries]}


# --- the platform -------------------------------------------------------------------------------


@dataclass
class Container:
    handler: Callable[[Any, Any], Any]
    function: str
    busy: bool = False


@dataclass(frozen=True)
class Config:
    """One soak: how many tasks, the seed, the faults, and what is on trial."""

    tasks: int
    seed: int
    faults: tuple[str, ...] = FAULTS
    broken_guard: bool = False
    """The claim's condition removed: the counters must catch it."""
    fifo_fixed: bool = True
    """The emulator's FIFO fixes on (off: moto's FIFO queues as they are)."""


class TasksSoak:
    QUEUES: tuple[str, ...] = (PLAIN, ORDERED)
    """The tasks, each on its own queue of the same name (the flows soak adds its own)."""

    def __init__(
        self,
        clients: dict[str, Any],
        config: Config,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.tasks = config.tasks
        self.seed = config.seed
        self.faults = config.faults
        self.broken_guard = config.broken_guard
        self.fifo_fixed = config.fifo_fixed
        self.rng = random.Random(config.seed)
        self.clock = ManualClock(START)
        self.sim = Simulation(self.clock)
        self.ledger = Ledger()
        self.clients = clients
        self.requests: Counter[str] = Counter()
        self.events = EventSink(self.ledger)
        self.current: list[Invocation] = []
        self.containers: dict[str, list[Container]] = {name: [] for name in self.QUEUES}
        self.healed = False
        self.invocations = 0
        self.redriven = 0
        self.fate: dict[str, str] = {}
        self._task_of: dict[str, str] = {}
        self._polling: dict[str, bool] = {}
        self._next_poll: dict[str, datetime] = {}
        self._request = 0
        self._progress = progress
        self._reported = 0
        self._started = 0.0
        self._enqueued = 0
        self.catalog = self._catalog()
        self.app = TaskClient(
            self.catalog,
            sqs=Faulty(clients["application sqs"], self, "sqs", kills=False),
            dynamodb=Faulty(clients["application dynamodb"], self, "dynamodb", kills=False),
            s3=clients["operator s3"],
            clock=self.clock,
            sleep=self._sleep,
        )

    # --- set-up --------------------------------------------------------------------------------

    def _catalog(self) -> Catalog:
        return Catalog({name: self._spec(name, fifo=name == ORDERED) for name in self.QUEUES})

    def _spec(self, name: str, *, fifo: bool) -> TaskSpec:
        """The task ``name`` on a new queue of its name, with its dead-letter queue."""
        sqs = self.clients["operator sqs"]
        suffix = ".fifo" if fifo else ""
        fifo_attributes = {"FifoQueue": "true"} if fifo else {}
        dead = sqs.create_queue(QueueName=f"{name}-dead{suffix}", Attributes=fifo_attributes)[
            "QueueUrl"
        ]
        dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        policy = {
            "deadLetterTargetArn": dead_arn,
            "maxReceiveCount": max_receive_count(RETRIES, BATCH if fifo else 1),
        }
        url = sqs.create_queue(
            QueueName=f"{name}{suffix}",
            Attributes=fifo_attributes
            | {"VisibilityTimeout": str(VISIBILITY_S), "RedrivePolicy": json.dumps(policy)},
        )["QueueUrl"]
        return TaskSpec(
            name=name,
            queue_url=url,
            table=TABLE,
            dead_letter_url=dead,
            ordered=fifo,
            retention=timedelta(days=7),
            completion_events=CompletionEvents.ALL,
            visibility_timeout=timedelta(seconds=VISIBILITY_S),
            max_queue_age=timedelta(minutes=15),
        )

    def _handler(self, name: str) -> Callable[[Any, Any], Any]:
        spec = self.catalog.spec(name)
        skew = timedelta(
            seconds=self.rng.uniform(-MAX_SKEW_S, MAX_SKEW_S) if self.on("skew") else 0.0
        )
        clock: Callable[[], datetime] = lambda: self.clock() + skew  # noqa: E731
        return decorator.task(
            self._body_of(name),
            settings=TaskSettings(
                task=name,
                table=TABLE,
                queue_url=spec.queue_url,
                dead_letter_url=spec.dead_letter_url,
                retries=RETRIES,
                backoff=BACKOFF,
                ordered=spec.ordered,
                lease_margin=LEASE_MARGIN,
                completion_events=CompletionEvents.ALL,
                results_bucket=BUCKET,
            ),
            dynamodb=Faulty(self.clients["function dynamodb"], self, "dynamodb", kills=True),
            sqs=Faulty(self.clients["function sqs"], self, "sqs", kills=True),
            events=Faulty(self.events, self, "events", kills=True),
            s3=Faulty(self.clients["function s3"], self, "s3", kills=True),
            children=self._children(clock),
            clock=clock,
            sleep=self._sleep,
        )

    def _body_of(self, name: str) -> Callable[[Any, Any], Any]:
        """The body of the task ``name`` (one body for both tasks here)."""
        return self._body

    def _children(self, clock: Callable[[], datetime]) -> TaskClient | None:
        """The TaskClient a flow's ``run.map`` enqueues with (tasks have none)."""
        return None

    # --- faults --------------------------------------------------------------------------------

    def on(self, fault: str) -> bool:
        return fault in self.faults

    def chance(self, fault: str, rate: str | None = None) -> bool:
        return self.on(fault) and self.rng.random() < RATES[rate or fault]

    def call(
        self, service: str, name: str, method: Any, kwargs: dict[str, Any], *, kills: bool
    ) -> Any:
        """One request of a client with faults: what the soak does to it, then the request."""
        invocation = self.current[-1] if kills and self.current else None
        if invocation is not None and self.clock() > invocation.deadline:
            raise Killed()  # Lambda stopped it at its deadline: no request after that
        write = name in WRITES.get(service, ())
        if invocation is not None and write:
            if name == "put_events" and self.chance("kill", "kill-event"):
                self._die(invocation, "killed before PutEvents")
            if self.chance("kill"):
                self._die(invocation, f"killed before {name}")
        if write and self.chance("throttle"):
            self._note("throttle", invocation)
            code, status = THROTTLE[service]
            raise throttled(name, code, status)
        answer = method(**kwargs)
        if service == "dynamodb" and write and self.chance("applied-error"):
            self._note("applied-error", invocation)
            if self.rng.random() < 0.5:
                raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
            raise ClientError(
                {
                    "Error": {"Code": "InternalServerError", "Message": "applied (soak)"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                name,
            )
        if invocation is not None and write and self.chance("kill"):
            self._die(invocation, f"killed after {name}")
        if not kills and name == "send_message":
            self._sent(kwargs["MessageBody"])
        return answer

    def _sent(self, body: str) -> None:
        """An application's message entered its queue: a group's order is the order of sends
        (an enqueue may return much later: its record's write retried meanwhile)."""
        envelope = json.loads(body)["vigil_task"]
        key, group = envelope["id"], envelope.get("group")
        self.ledger.sent.add(key)
        if not self._stopped:
            self._wake(envelope["task"], POLL)
        if group is not None and key not in self.ledger.sent_order[group]:
            self.ledger.sent_order[group].append(key)

    def _note(self, fault: str, invocation: Invocation | None) -> None:
        if invocation is None:
            return
        invocation.faults.append(fault)
        for run in invocation.runs:
            if run.completed and run.end is not None:
                run.faults_after.append(fault)

    def _die(self, invocation: Invocation, why: str) -> None:
        invocation.faults.append(why)
        for run in invocation.runs:
            if run.completed:
                run.faults_after.append("killed")
        raise Killed()

    # --- the clock -----------------------------------------------------------------------------

    def _sleep(self, seconds: float) -> None:
        self.sim.run_until(self.clock() + timedelta(seconds=seconds))

    def _wait(self, seconds: float, invocation: Invocation) -> None:
        """A body taking time: what is due meanwhile happens (other invocations), and if its
        invocation's deadline passed meanwhile, Lambda stopped it there."""
        self.sim.run_until(self.clock() + timedelta(seconds=seconds))
        if self.clock() > invocation.deadline:
            raise Killed()

    # --- the application --------------------------------------------------------------------

    def _schedule_tasks(self) -> None:
        """Plain tasks one by one; ordered ones in bursts of 1 to 4 steps of one group (a
        tenant's create, resize, delete), so a group's messages share batches and time out
        together."""
        n = 0
        while n < self.tasks:
            at = START + SPACING * (n + 1)
            if self.rng.random() < ORDERED_SHARE:
                group = f"g{self.rng.randrange(GROUPS)}"
                burst = min(self.rng.randint(1, 4), self.tasks - n)
                for step in range(burst):
                    self._schedule_task(n + step, at + timedelta(seconds=0.2 * step), group)
                n += burst
            else:
                self._schedule_task(n, at, None)
                n += 1

    def _schedule_task(self, n: int, at: datetime, group: str | None) -> None:
        key = f"k{n:06d}-{self.rng.getrandbits(24):06x}#x:@"  # ids with '#:@' held too
        fate = self.rng.choices(list(FATES), weights=list(FATES.values()))[0]
        self.fate[key] = fate
        task = ORDERED if group else PLAIN
        self._task_of[key] = task
        if group:
            self.ledger.group_of[key] = group
        delay = (
            self.rng.uniform(1, 60) if not group and self.rng.random() < RATES["delay"] else None
        )
        self._later(at, self._enqueuer(task, key, group, delay))
        if self.chance("enqueue-twice"):
            self._later(at, self._enqueuer(task, key, group, delay))
        if self.chance("enqueue-twice", "again-later"):
            later = at + timedelta(hours=self.rng.uniform(2, 6))
            self._later(later, self._enqueuer(task, key, group, None))
        if self.chance("cancel"):
            at_cancel = at + timedelta(seconds=self.rng.uniform(0, 5))
            self._later(at_cancel, self._canceller(task, key))

    def _enqueuer(
        self, task: str, key: str, group: str | None, delay: float | None
    ) -> Callable[[], None]:
        def enqueue() -> None:
            self._enqueued += 1
            self._report_progress()
            try:
                self.app.enqueue(task, {"fate": self.fate[key]}, key=key, group=group, delay=delay)
            except EnqueuedUnrecorded:
                pass  # the message is out: the task runs (its claim writes the record)
            except ClientError:
                # the send itself was refused: nothing went out; the application tries again
                self._later(self.clock() + timedelta(seconds=1), enqueue)

        return enqueue

    def _canceller(self, task: str, key: str) -> Callable[[], None]:
        def cancel() -> None:
            asked = self.clock()
            try:
                record = self.app.cancel(task, key)
            except NotCancellable:
                return  # started already
            except (ClientError, BotoCoreError):
                # throttled (nothing written), or applied with its answer lost: the application
                # reads the record to know which
                try:
                    record = self.app.get(task, key)
                except LookupError:
                    return
            if record.status is TaskStatus.CANCELLED:
                self.ledger.cancelled_at.setdefault(key, asked)

        return cancel

    # --- the task's body ---------------------------------------------------------------------

    def _body(self, run: Any, payload: dict[str, Any]) -> Any:
        invocation = self.current[-1]
        key = run.id
        runs = self.ledger.runs[key]
        mine = Run(
            key,
            run.attempt,
            run.fencing_token,
            self.clock(),
            invocation,
            self.ledger.redrives[key],
        )
        runs.append(mine)
        invocation.runs.append(mine)
        try:
            if self.chance("progress", "progress"):
                run.progress(50, "half way")
            if self.chance("kill", "hang"):
                self._wait((invocation.deadline - self.clock()).total_seconds() + 60, invocation)
            self._wait(self.rng.uniform(0.2, 3.0), invocation)
            fate = payload["fate"]
            failing = (
                fate == "poison"
                or (fate == "healed" and not self.healed)
                or (fate == "flaky" and len(runs) <= 1 + int(key[1:7]) % 2)
            )
            if failing:
                raise RuntimeError(f"the work failed ({fate})")
            mine.completed = self.ledger.write(key, run.fencing_token)
            return {"done": key} | ({"lines": "x" * BIG_RESULT} if fate == "big" else {})
        finally:
            mine.end = min(self.clock(), invocation.deadline)

    # --- the event source --------------------------------------------------------------------

    def _poll(self, name: str) -> Callable[[], None]:
        def poll() -> None:
            self._polling[name] = False
            if self._stopped:
                return
            due = self._next_due(name)
            room = sum(c.busy for c in self.containers[name]) < CONCURRENCY
            if due <= timedelta(0) and room and self._receive(name):
                self._wake(name, POLL)  # more may be waiting: poll again soon
            else:
                self._wake(name, max(POLL, due))

        return poll

    def _wake(self, name: str, after: timedelta) -> None:
        """The queue's next poll, ``after`` from now (at most one pending: a sooner one wins)."""
        at = self.clock() + after
        due = self._next_poll.get(name)
        if self._polling.get(name) and due is not None and due <= at:
            return
        self._polling[name] = True
        self._next_poll[name] = at
        poll = self._poll(name)

        def at_its_time() -> None:
            if self._next_poll.get(name) == at:
                poll()

        self.sim.at(at, at_its_time)

    def _next_due(self, name: str) -> timedelta:
        """How long until a message of the queue can be received (zero or less: now), read in
        moto's queue in place (the event source's empty polls are a fixed cost, not a task's); a
        minute when it is empty (a send wakes the poller sooner)."""
        queue = self._moto_queue(name)
        heads: set[str] = set()
        moments = []
        for message in queue._messages:
            if message.group_id is not None:  # a FIFO group waits for its first message
                if message.group_id in heads:
                    continue
                heads.add(message.group_id)
            moments.append(_receivable_at(message))
        if not moments:
            return timedelta(minutes=1)
        return min(moments) - self.clock()

    def _moto_queue(self, name: str) -> Any:
        from moto.sqs.models import sqs_backends

        url = self.catalog.spec(name).queue_url
        account, queue_name = url.rstrip("/").split("/")[-2:]
        return sqs_backends[account]["us-east-1"].get_queue(queue_name)

    def _receive(self, name: str) -> bool:
        """One poll of the event source: a batch received and invoked; False if none came."""
        spec = self.catalog.spec(name)
        answer = self.clients["event source sqs"].receive_message(
            QueueUrl=spec.queue_url,
            MaxNumberOfMessages=BATCH,
            VisibilityTimeout=VISIBILITY_S,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        batch = sqs_records(answer.get("Messages", []))
        if not batch:
            return False
        if not spec.ordered and self.chance("duplicate"):  # FIFO queues hand out no copies
            copy = self.rng.choice(batch)
            at = self.clock() + timedelta(seconds=self.rng.uniform(0.1, 20))
            self._later(at, lambda: self._invoke(name, [copy]))
        self._invoke(name, batch)
        return True

    def _container(self, name: str) -> Container:
        for container in self.containers[name]:
            if not container.busy:
                return container
        container = Container(self._handler(name), name)
        self.containers[name].append(container)
        return container

    def _invoke(self, name: str, batch: list[dict[str, Any]]) -> None:
        if sum(c.busy for c in self.containers[name]) >= CONCURRENCY:
            # no room: the copy waits (as a held-back message would)
            self._later(self.clock() + POLL, lambda: self._invoke(name, batch))
            return
        self.invocations += 1
        self._request += 1
        container = self._container(name)
        invocation = Invocation(name, f"r-{self.seed}-{self._request}", self.clock() + TIMEOUT)
        context = LambdaContext(
            aws_request_id=invocation.request_id,
            remaining_ms=lambda: max(
                0, int((invocation.deadline - self.clock()).total_seconds() * 1000)
            ),
        )
        if self.chance("lapse"):
            record = self.rng.choice(batch)
            lapse_at = self.clock() + timedelta(seconds=self.rng.uniform(0.1, 2))
            self._later(lapse_at, lambda: self._lapse(name, record))
        container.busy = True
        self.current.append(invocation)
        answer: Any = None
        try:
            answer = container.handler({"Records": batch}, context)
        except Killed:
            invocation.killed = True
        except Exception:  # the whole batch failed: it stays
            answer = {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in batch]}
        finally:
            self.current.pop()
            container.busy = False
        if invocation.killed or self.clock() > invocation.deadline:
            invocation.killed = True
            self.containers[name].remove(container)  # a timed-out sandbox is not reused
            self._landed(invocation)
            return
        self._landed(invocation)
        ids = [r["messageId"] for r in batch]
        failed, _ = batch_item_failures(answer, ids)
        done = [r for r in batch if r["messageId"] not in failed]
        done = [r for r in done if not self.chance("delete")]
        url = self.catalog.spec(name).queue_url
        for start in range(0, len(done), BATCH):
            self.clients["event source sqs"].delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": r["receiptHandle"]}
                    for i, r in enumerate(done[start : start + BATCH])
                ],
            )

    def _landed(self, invocation: Invocation) -> None:
        """For each run of the invocation that did its work: did its outcome land? (Read by
        the harness, uncounted: why a second body may be explained.)"""
        store = TaskStore(self.clients["harness dynamodb"], TABLE)
        for run in invocation.runs:
            if not run.completed:
                continue
            item = store.item(self._task_of[run.key], run.key) or {}
            if int(item.get("token", -1)) == run.token:
                run.landed = item.get("status") != TaskStatus.RUNNING.value

    def _lapse(self, name: str, record: dict[str, Any]) -> None:
        """The message's visibility lapses while its run goes on (a too-short visibility)."""
        with contextlib.suppress(ClientError):
            self.clients["harness sqs"].change_message_visibility(
                QueueUrl=self.catalog.spec(name).queue_url,
                ReceiptHandle=record["receiptHandle"],
                VisibilityTimeout=0,
            )

    # --- the run -------------------------------------------------------------------------------

    _stopped = False
    _pending = 0
    """Events of work still due (enqueues, cancels, copies, lapses): not idle while any is."""

    def _later(self, at: datetime, action: Callable[[], None]) -> None:
        self._pending += 1

        def run() -> None:
            self._pending -= 1
            action()

        self.sim.at(at, run)

    def run(self) -> Report:
        self._started = time.perf_counter()
        self._schedule_tasks()
        with quiet_telemetry(), _broken() if self.broken_guard else contextlib.nullcontext():
            self._drain()
            for round_ in range(REDRIVES):
                self.clock.advance(timedelta(hours=1))
                self._redrive_all()
                if round_ == 0:
                    self.healed = True
                self._drain()
            self.clock.advance(timedelta(days=1))  # every retry's bound is past: audit it all
            stranded = audit(
                self.catalog,
                lambda spec: TaskStore(self.clients["operator dynamodb"], TABLE),
                self.clock(),
            )
        return self._report(time.perf_counter() - self._started, len(stranded))

    def _drain(self) -> None:
        """Poll until every queue is empty and nothing more is due."""
        self._stopped = False
        self._polling.clear()
        self._next_poll.clear()
        for name in self.QUEUES:
            self._wake(name, timedelta(0))

        def check() -> None:
            if self._idle():
                self._stopped = True
            else:
                self.sim.at(self.clock() + timedelta(minutes=1), check)

        self.sim.at(self.clock() + timedelta(minutes=1), check)
        self.sim.run_until(None)

    def _idle(self) -> bool:
        if self._pending or any(c.busy for cs in self.containers.values() for c in cs):
            return False
        return not any(self._moto_queue(name)._messages for name in self.QUEUES)

    def _redrive_all(self) -> None:
        sqs = self.clients["operator sqs"]
        for name in self.QUEUES:
            spec = self.catalog.spec(name)
            done = redrive(
                sqs, TaskQueue(sqs, spec.queue_url, spec.dead_letter_url), task=name, limit=100_000
            )
            self.redriven += len(done.moved)
            for key in set(done.moved):
                self.ledger.redrives[key] += 1

    def _report_progress(self) -> None:
        if self._progress is None or self._enqueued < self._reported + PROGRESS_EVERY:
            return
        self._reported = self._enqueued - self._enqueued % PROGRESS_EVERY
        seconds = time.perf_counter() - self._started
        self._progress(
            f"enqueue {self._enqueued:,} of about {self.tasks:,} after {seconds:.0f} s "
            f"({self._enqueued / seconds:.1f}/s)"
        )

    # --- the verdict -----------------------------------------------------------------------------

    def _report(self, seconds: float, stranded: int) -> Report:
        records = {r["sk"]: r for r in _items(self.clients["operator dynamodb"])}
        examples: dict[str, list[str]] = defaultdict(list)
        counts: Counter[str] = Counter()
        causes: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        final = {s.value for s in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED)}
        for key in self.fate:
            if key not in self.ledger.sent:
                continue
            record = records.get(key, {})
            status = record.get("status", "none")
            outcomes[status] += 1
            runs = self.ledger.runs.get(key, [])
            if status not in final:
                counts["lost"] += 1
                examples["lost"].append(f"{key} {status}")
            completions = [r for r in runs if r.completed]
            for earlier, later in itertools.pairwise(completions):
                why = cause(earlier)
                causes[why] += 1
                examples[why].append(f"{key} tokens {earlier.token}, {later.token}")
            budget = (RETRIES + 1) * (1 + self.ledger.redrives[key])
            if len(runs) > budget:
                counts["beyond"] += 1
                examples["beyond budget"].append(f"{key}: {len(runs)} runs, budget {budget}")
            cancelled = self.ledger.cancelled_at.get(key)
            if cancelled is not None and any(r.start > cancelled for r in runs):
                counts["after cancel"] += 1
                examples["after cancel"].append(key)
            if disagrees(record, self.ledger, key):
                counts["mismatch"] += 1
                examples["mismatch"].append(f"{key} {status} token {record.get('token')}")
            if status == TaskStatus.FAILED.value and self.fate[key] in ("ok", "flaky", "big"):
                counts["failed unexpectedly"] += 1
                examples["failed unexpectedly"].append(f"{key} {record.get('error_type')}")
            missing, conflicting = events_of(record, self.ledger.events.get(key, []))
            counts["events missing"] += missing
            counts["events conflicting"] += conflicting
            if missing:
                examples["event missing"].append(f"{key} {status}")
            if conflicting:
                examples["event conflicting"].append(key)
        overlaps, disorder = group_checks(self.ledger)
        for what, found in (("overlap", overlaps), ("out of order", disorder)):
            counts[what] = len(found)
            if found:
                examples[what].extend(found)
        return Report(
            tasks=len(self.ledger.sent),
            seed=self.seed,
            faults=self.faults,
            broken_guard=self.broken_guard,
            fifo_fixed=self.fifo_fixed,
            lost=counts["lost"],
            second_bodies=causes,
            beyond_budget=counts["beyond"],
            events_missing=counts["events missing"],
            events_conflicting=counts["events conflicting"],
            overlaps=counts["overlap"],
            out_of_order=counts["out of order"],
            after_cancel=counts["after cancel"],
            mismatches=counts["mismatch"],
            stranded=stranded,
            failed_unexpectedly=counts["failed unexpectedly"],
            outcomes=outcomes,
            requests=self.requests,
            invocations=self.invocations,
            redriven=self.redriven,
            seconds=seconds,
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            examples={k: v[:5] for k, v in examples.items()},
        )


def _items(client: Any) -> Iterator[dict[str, Any]]:
    request = {"TableName": TABLE}
    yield from paginate(client.scan, request)


@contextlib.contextmanager
def _broken() -> Iterator[None]:
    """The claim with each of its conditions made one that always holds: any claim of any task
    wins (the request keeps a condition: ALL_OLD on a refusal needs one; each condition is kept
    inside one that always holds, so every name it uses is still used)."""
    from vigil.dynamo import Update, any_of
    from vigil.tasks.store import TaskStore as Store

    original_claim, original_condition = Store.claim, Update.condition

    def always(update: Any, *conditions: str) -> Any:
        return original_condition(
            update, any_of(update.absent("pk"), update.exists("pk"), *conditions)
        )

    def claim(self: Any, claim: Any) -> Any:
        Update.condition = always  # type: ignore[method-assign]
        try:
            return original_claim(self, claim)
        finally:
            Update.condition = original_condition  # type: ignore[method-assign]

    Store.claim = claim  # type: ignore[method-assign]
    try:
        yield
    finally:
        Store.claim = original_claim  # type: ignore[method-assign]


@contextlib.contextmanager
def moto_clock(clock: ManualClock) -> Iterator[None]:
    """moto's SQS reads ``clock``: visibility, delays, the redrive policy and FIFO's five-minute
    deduplication act on simulated time."""
    from moto.sqs import models

    saved = models.unix_time, models.unix_time_millis

    def unix_time(dt: datetime | None = None) -> float:
        return saved[0](dt) if dt is not None else clock().timestamp()

    def unix_time_millis(dt: datetime | None = None) -> float:
        return saved[1](dt) if dt is not None else clock().timestamp() * 1000.0

    models.unix_time, models.unix_time_millis = unix_time, unix_time_millis  # type: ignore[assignment]
    try:
        yield
    finally:
        models.unix_time, models.unix_time_millis = saved  # type: ignore[assignment]


def _counted(client: Any, role: str, requests: Counter[str]) -> Any:
    service = client.meta.service_model.service_name

    def count(**_: Any) -> None:
        requests[f"{role} {service}"] += 1

    client.meta.events.register("before-call.*.*", count)
    return client


def soak(
    *,
    tasks: int,
    seed: int,
    faults: Sequence[str] = FAULTS,
    broken_guard: bool = False,
    fifo_fixed: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """One soak in a fresh moto account (``mock_aws``)."""
    with soak_account(seed, fifo_fixed=fifo_fixed) as (clients, requests):
        config = Config(tasks, seed, tuple(faults), broken_guard, fifo_fixed)
        run = TasksSoak(clients, config, progress)
        run.requests = requests
        _count_events(run, requests)
        with moto_clock(run.clock):
            return run.run()


@contextlib.contextmanager
def soak_account(
    seed: int, *, fifo_fixed: bool = True
) -> Iterator[tuple[dict[str, Any], Counter[str]]]:
    """A fresh moto account (``mock_aws``) with the tasks table and the results bucket, seeded:
    each role's clients (counted into the requests' counter) and that counter."""
    import boto3
    from moto import mock_aws
    from moto.moto_api._internal import mock_random

    from vigil_tools.emulator import moto_memory, moto_responses, moto_speed, moto_sqs_fifo

    lean = moto_memory.installed()
    moto_memory.install()  # a long soak must not grow with every write (its docstring)
    moto_speed.install()
    moto_responses.install()
    was_fixed = moto_sqs_fifo.installed()
    if fifo_fixed:
        moto_sqs_fifo.install()
    else:
        moto_sqs_fifo.uninstall()
    states = random.getstate(), mock_random.getstate()
    mock_random.seed(seed)
    random.seed(seed)  # persist's jitter draws from the module's generator
    try:
        with mock_aws():
            session = boto3.Session(
                region_name="us-east-1", aws_access_key_id="soak", aws_secret_access_key="soak"
            )
            requests: Counter[str] = Counter()
            clients: dict[str, Any] = {}
            for role in ("function", "application", "event source", "operator", "harness"):
                for service in ("dynamodb", "sqs", "s3"):
                    clients[f"{role} {service}"] = _counted(session.client(service), role, requests)
            create_tasks_table(clients["operator dynamodb"], TABLE)
            clients["operator s3"].create_bucket(Bucket=BUCKET)
            yield clients, requests
    finally:
        random.setstate(states[0])
        mock_random.setstate(states[1])
        if was_fixed:
            moto_sqs_fifo.install()
        else:
            moto_sqs_fifo.uninstall()
        if not lean:
            moto_memory.uninstall()


def _count_events(run: TasksSoak, requests: Counter[str]) -> None:
    """The event sink is no boto3 client: its PutEvents are counted where they are taken."""
    put = run.events.put_events

    def counted(Entries: list[dict[str, Any]]) -> dict[str, Any]:
        requests["function events"] += 1
        return put(Entries=Entries)

    run.events.put_events = counted  # type: ignore[method-assign]


# --- the command line and `make bench` ---------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m benchmarks.tasks_soak",
        description="Chaos soak of tasks on the emulator, checked by an independent ledger.",
    )
    command.add_argument(
        "--tasks", type=positive("--tasks"), default=10_000, help="tasks (default 10000)"
    )
    seed_and_faults(command, FAULTS)
    command.add_argument(
        "--broken-guard", action="store_true", help="remove the claim's condition: must be caught"
    )
    command.add_argument(
        "--fifo-as-moto",
        action="store_true",
        help="moto's FIFO queues without the emulator's fixes (ordering, deduplication)",
    )
    return command


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report = soak(
        tasks=args.tasks,
        seed=args.seed,
        faults=args.faults,
        broken_guard=args.broken_guard,
        fifo_fixed=not args.fifo_as_moto,
        progress=to_stderr,
    )
    return verdict(report, args.broken_guard)


SEEDS = (1, 2)
BENCH_TASKS = 10_000


def run(tasks: int = BENCH_TASKS, seeds: Sequence[int] = SEEDS) -> str:
    """The benchmarks page's table: the soak at ``tasks`` with each seed, then the broken guard
    and moto's FIFO queues as they are."""
    reports = [soak(tasks=tasks, seed=seed) for seed in seeds]
    broken = soak(tasks=min(tasks, 1_000), seed=seeds[0], broken_guard=True)
    as_moto = soak(tasks=min(tasks, 2_000), seed=seeds[0], fifo_fixed=False)
    return page([*reports, broken, as_moto])


def page(reports: Sequence[Report]) -> str:
    """The table and what it ran."""
    return table(reports) + "\n\n" + NOTES


NOTES = (
    f"Every fault on ({', '.join(FAULTS)}) at the rates of `RATES` (per write, per run, per "
    f"message: a throttle past botocore's retries on {RATES['throttle']:.1%} of writes, a kill "
    f"at {RATES['kill']:.1%} of the function's requests and before {RATES['kill-event']:.0%} of "
    f"PutEvents, ...); two tasks, {1 - ORDERED_SHARE:.0%} on a standard queue and "
    f"{ORDERED_SHARE:.0%} on a FIFO queue in {GROUPS} groups (in bursts of 1 to 4 steps), "
    f"retries {RETRIES}, every outcome announced; fates: "
    + ", ".join(f"{fate} {share:.0%}" for fate, share in FATES.items())
    + ". The operator redrives both dead-letter queues twice, then the stranded-tasks audit runs. "
    "`python -m benchmarks.tasks_soak --tasks N --seed S [--faults a,b] [--broken-guard] "
    "[--fifo-as-moto]` reruns one. The broken guard's claim takes any record (its condition "
    "replaced by one that always holds): the soak catches it by its second bodies and runs "
    "beyond the budget. \"moto's FIFO as it is\" runs without the emulator's FIFO fixes: "
    "its out-of-order runs are the kit's false results that the fixes remove."
)


if __name__ == "__main__":
    sys.exit(main())
