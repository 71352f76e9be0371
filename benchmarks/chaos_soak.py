"""A chaos soak of the jobs guard: thousands of ticks under seeded faults, checked by a ledger.

The project's own handler logic (``vigil.jobs.decorator``), guard and run store run on moto
(in-process, with ``vigil_tools.emulator.moto_memory`` keeping it flat) under a simulated clock
and a simulated Lambda: each tick is delivered 1-3 times (the scheduler delivers at least once),
each delivery is an asynchronous invocation with Lambda's retries (1 and then 2 minutes after a
failure or a timeout), then the on-failure destination record, and after the last tick the
operator redrives what was dead-lettered as ``vigil jobs redrive`` does for a skip job: one tick at
a time, oldest first, a synchronous invocation each (again while some fail, up to three times).
Containers stay warm between invocations (a retry lands on the
container of its previous attempt most of the time) and each has its own clock skew.

Faults (``--faults``, all by default):

``duplicate``      1-3 copies of each tick
``concurrent``     the copies arrive while the first runs (requests are serialized, as moto needs)
``fail-first``     the body raises on a tick's first attempt
``hang``           a first attempt stalls past its deadline and its lease; Lambda times it out and
                   retries, and the stalled run wakes later and writes its effect (refused if a
                   takeover wrote a newer one) and its outcome (fenced)
``throttle``       a write is throttled past botocore's own retries (nothing applied)
``applied-error``  a write is applied but answered with an error (a timeout or a 500)
``skew``           each container's clock is off by up to 14 s (two clocks differ by less than
                   the 30 s ``lease_margin``, the documented limit)

What is counted does not come from Vigil's records: every body that does its work writes an
effect to a ledger that accepts a write only with a fencing token above the last it accepted for
that tick (what a body's own fenced writes do), and the body journals that effect (``run.once``,
with a ``check`` that reads the ledger), so a hung run that did it before its takeover is not
followed by a second. At the end Vigil's records (and their journals) are compared with the ledger.

    python -m benchmarks.chaos_soak --ticks 10000 --seed 1 [--faults a,b] [--broken-guard]

``--broken-guard`` runs the same soak with the claim's condition on the tick record removed (any
claim wins) and the effect unjournaled (the guard alone on trial): the soak must report second
bodies and effects accepted twice.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import heapq
import inspect
import io
import random
import resource
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

from tests.helpers.clients import Delegating
from vigil import telemetry
from vigil.clock import ManualClock, iso_seconds
from vigil.contract.jobs import SCHEDULER_INPUT_KEY
from vigil.contract.journal import JOURNAL_ATTRIBUTE
from vigil.effects.fence import Fenced
from vigil.jobs import decorator, store
from vigil.jobs.guard import JobGuard, Run
from vigil.jobs.model import JobSettings, Overlap, RunStatus
from vigil.jobs.store import RunStore
from vigil_tools.emulator.lambda_runtime import LAMBDA_RETRY_DELAYS
from vigil_tools.lambda_context import LambdaContext

FAULTS = ("duplicate", "concurrent", "fail-first", "hang", "throttle", "applied-error", "skew")
START = datetime(2026, 11, 22, tzinfo=UTC)
INTERVAL = timedelta(minutes=10)
"""Between ticks: longer than a tick's retries and a hang, so ticks rarely meet (skip policy)."""
TIMEOUT = timedelta(seconds=60)
"""The function's timeout: the invocation's deadline, from which the lease is computed."""
JOB = "soak"
EFFECT = "ledger-write"
RATES = {
    "fail-first": 0.05,
    "hang": 0.02,
    "throttle": 0.02,
    "applied-error": 0.01,
    "concurrent": 0.5,
    "warm": 0.7,
}
"""Per tick (fail-first, hang), per write (throttle, applied-error), per extra copy (concurrent),
per retry (warm: it lands on its previous attempt's container)."""
MAX_SKEW_S = 14.0
REDRIVE_ROUNDS = 3
"""How many times the operator runs the redrive while something stays in the dead-letter queue."""
PROGRESS_EVERY = 500


class Killed(BaseException):
    """Not an error of the code under test: the simulation unwinding a zombie's stack."""


@dataclass
class Ledger:
    """The effects the bodies wrote, keyed by tick, checked by fencing token only."""

    last: dict[str, int] = field(default_factory=dict)
    accepted: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)

    def write(self, tick: str, token: int) -> bool:
        if token <= self.last.get(tick, 0):
            self.refused[tick] += 1
            return False
        self.last[tick] = token
        self.accepted[tick] += 1
        return True


@dataclass(order=True)
class _Event:
    at: datetime
    seq: int
    action: Callable[[], None] = field(compare=False)


class Simulation:
    """A clock and the events due on it; a body that takes time lets the events due meanwhile
    happen (other copies, retries, timeouts): that is how copies run concurrently here."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._queue: list[_Event] = []
        self._seq = 0

    def at(self, moment: datetime, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, _Event(moment, self._seq, action))

    def run_until(self, moment: datetime | None) -> None:
        while self._queue and (moment is None or self._queue[0].at <= moment):
            event = heapq.heappop(self._queue)
            if event.at > self.clock():
                self.clock.set(event.at)
            event.action()
        if moment is not None and moment > self.clock():
            self.clock.set(moment)


class FaultyClient(Delegating):
    """The run store's DynamoDB client, with the soak's write faults, for one container."""

    def __init__(self, client: Any, soak: Soak) -> None:
        super().__init__(client)
        self._soak = soak

    def transact_write_items(self, **kwargs: Any) -> Any:
        return self._write("transact_write_items", kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        return self._write("update_item", kwargs)

    def _write(self, operation: str, kwargs: dict[str, Any]) -> Any:
        soak = self._soak
        fault = soak.write_fault()
        if fault == "throttle":
            soak.note_write_fault(fault)
            raise ClientError(
                {
                    "Error": {
                        "Code": "ProvisionedThroughputExceededException",
                        "Message": "throttled past botocore's retries (chaos soak)",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                operation,
            )
        answer = getattr(self._client, operation)(**kwargs)
        if fault == "applied-error":
            soak.note_write_fault(fault)
            if soak.rng.random() < 0.5:
                raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
            raise ClientError(
                {
                    "Error": {"Code": "InternalServerError", "Message": "applied (chaos soak)"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                operation,
            )
        return answer


@dataclass
class _Container:
    handle: Callable[[Any, Any], Any]
    skew: timedelta
    busy: bool = False


@dataclass
class _Attempt:
    """One invocation of one request: what the platform and the body saw."""

    request_id: str
    number: int
    deadline: datetime
    tick: str
    ended: bool = False
    timed_out: bool = False
    completed_token: int | None = None
    """The token of the body that did its work in this attempt, if any."""
    hung: bool = False
    write_faults: list[str] = field(default_factory=list)


@dataclass
class Report:
    ticks: int
    seed: int
    faults: tuple[str, ...]
    broken_guard: bool
    lost: int
    second_bodies: Counter[str]
    effects_twice: int
    late_writes_refused: int
    mismatches: int
    requests: int
    invocations: int
    dead_lettered: int
    seconds: float
    peak_rss_mb: float
    examples: dict[str, list[str]]

    @property
    def requests_per_tick(self) -> float:
        return self.requests / self.ticks if self.ticks else 0.0

    @property
    def ticks_per_second(self) -> float:
        return self.ticks / self.seconds if self.seconds else 0.0

    @property
    def caught(self) -> bool:
        """Did the soak see a guard failing its promise (a body twice, an effect twice)?"""
        return self.effects_twice > 0 or self.lost > 0 or self.mismatches > 0

    def lines(self) -> list[str]:
        causes = ", ".join(f"{c}: {n}" for c, n in sorted(self.second_bodies.items())) or "none"
        return [
            f"ticks {self.ticks}, seed {self.seed}, faults {','.join(self.faults) or 'none'}"
            + (", BROKEN GUARD" if self.broken_guard else ""),
            f"ticks lost: {self.lost}",
            f"second bodies by cause: {causes}",
            f"effects accepted twice: {self.effects_twice}",
            f"late effects refused (journal fence or token check): {self.late_writes_refused}",
            f"record/ledger mismatches: {self.mismatches}",
            f"dead-lettered then redriven: {self.dead_lettered}",
            f"DynamoDB requests per tick: {self.requests_per_tick:.2f}; "
            f"invocations per tick: {self.invocations / max(self.ticks, 1):.2f}",
            f"ticks per second: {self.ticks_per_second:.1f}; peak RSS: {self.peak_rss_mb:.0f} MB",
        ]


HANG_CAUSE = "hang past the lease (takeover; late write refused)"
CAUSES = {
    "throttle": "finish throttled past botocore's retries",
    "applied-error": "finish applied but answered with an error",
}


class Soak:
    def __init__(
        self,
        client: Any,
        table: str,
        *,
        ticks: int,
        seed: int,
        faults: Sequence[str] = FAULTS,
        broken_guard: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.ticks = ticks
        self.seed = seed
        self.faults = tuple(faults)
        self.broken_guard = broken_guard
        self.rng = random.Random(seed)
        self.clock = ManualClock(START)
        self.sim = Simulation(self.clock)
        self.ledger = Ledger()
        self.client = client
        self.table = table
        self.settings = JobSettings(job=JOB, table=table, overlap=Overlap.SKIP)
        self.idle: list[_Container] = []
        self.by_request: dict[str, _Container] = {}
        self.current: list[_Attempt] = []
        """The attempts whose body is on the stack, innermost last (writes are theirs)."""
        self.completions: dict[str, list[_Attempt]] = defaultdict(list)
        self.hang_ticks: set[str] = set()
        self.fail_ticks: set[str] = set()
        self.dead_letters: list[dict[str, Any]] = []
        self.invocations = 0
        self.late_refused = 0
        self._request = 0
        self._progress = progress
        self._reported = 0
        self._started = 0.0

    # --- faults ---------------------------------------------------------------------------

    def on(self, fault: str) -> bool:
        return fault in self.faults

    def write_fault(self) -> str | None:
        roll = self.rng.random()
        if self.on("throttle") and roll < RATES["throttle"]:
            return "throttle"
        if self.on("applied-error") and roll > 1 - RATES["applied-error"]:
            return "applied-error"
        return None

    def note_write_fault(self, fault: str) -> None:
        if self.current:
            self.current[-1].write_faults.append(fault)

    # --- the platform ------------------------------------------------------------------------

    def run(self) -> Report:
        started = self._started = time.perf_counter()
        for n in range(self.ticks):
            self._schedule_tick(START + INTERVAL * (n + 1))
        with quiet_telemetry(), self._broken() if self.broken_guard else _nothing():
            self.sim.run_until(None)
            redriven = self._operator_redrives()
        seconds = time.perf_counter() - started
        return self._report(seconds, redriven)

    def _operator_redrives(self) -> int:
        """The operator's ``vigil jobs redrive`` of what reached the on-failure destination, an
        hour later: a skip job's dead letters one at a time, oldest tick first, each answered
        before the next (``vigil/jobs/redrive.py``). What fails again stays in the queue, and the
        operator redrives again, up to ``REDRIVE_ROUNDS`` times. The number of records redriven."""
        redriven = 0
        for _ in range(REDRIVE_ROUNDS):
            if not self.dead_letters:
                break
            self.clock.advance(timedelta(hours=1))
            waiting, self.dead_letters = sorted(self.dead_letters, key=_tick_of), []
            for record in waiting:
                redriven += 1
                self._call(record)
                self.sim.run_until(None)
        return redriven

    def _call(self, record: dict[str, Any]) -> None:
        """A synchronous invocation: no Lambda retries; a failure leaves the record in the queue."""
        self._request += 1
        request_id = f"req-{self.seed}-{self._request}"
        kept = functools.partial(self.dead_letters.append, record)
        self.sim.at(self.clock(), lambda: self._attempt(record, request_id, 0, failed=kept))

    def _schedule_tick(self, moment: datetime) -> None:
        tick = iso_seconds(moment)
        copies = self.rng.choice((1, 1, 2, 3)) if self.on("duplicate") else 1
        if self.on("fail-first") and self.rng.random() < RATES["fail-first"]:
            self.fail_ticks.add(tick)
        if self.on("hang") and self.rng.random() < RATES["hang"]:
            self.hang_ticks.add(tick)
        event = {SCHEDULER_INPUT_KEY: {"job": JOB, "scheduled_time": tick}}
        self._invoke(event, moment + timedelta(seconds=self.rng.uniform(0, 1)))
        for _ in range(copies - 1):
            concurrent = self.on("concurrent") and self.rng.random() < RATES["concurrent"]
            offset = self.rng.uniform(0, 3) if concurrent else self.rng.uniform(15, 40)
            self._invoke(event, moment + timedelta(seconds=1 + offset))

    def _invoke(self, event: dict[str, Any], at: datetime) -> None:
        self._request += 1
        request_id = f"req-{self.seed}-{self._request}"
        self.sim.at(at, lambda: self._attempt(event, request_id, 0))

    def _attempt(
        self,
        event: dict[str, Any],
        request_id: str,
        number: int,
        failed: Callable[[], None] | None = None,
    ) -> None:
        """One attempt; ``failed`` is what a failure leads to (by default Lambda's async retry)."""
        failed = failed or functools.partial(self._retry, event, request_id, number)
        self.invocations += 1
        self._report_progress()
        container = self._container(request_id, number)
        now = self.clock()
        payload = event.get("requestPayload", event)[SCHEDULER_INPUT_KEY]
        attempt = _Attempt(request_id, number, now + TIMEOUT, payload["scheduled_time"])
        self.sim.at(attempt.deadline, lambda: self._timeout(attempt, container, failed))
        context = LambdaContext(
            aws_request_id=request_id,
            remaining_ms=lambda: max(
                0, int((attempt.deadline - self.clock()).total_seconds() * 1000)
            ),
        )
        raised = False
        container.busy = True
        self.current.append(attempt)
        try:
            container.handle(event, context)
        except Killed:
            raised = True
        except Exception:
            raised = True
        finally:
            self.current.pop()
            container.busy = False
        if attempt.timed_out:
            return  # the platform gave up on it at its deadline and already retried
        attempt.ended = True
        if raised:
            failed()

    def _report_progress(self) -> None:
        """Every ``PROGRESS_EVERY`` ticks: how far, and how fast (a 10,000-tick run takes a while)."""
        reached = min(self.ticks, (self.clock() - START) // INTERVAL)
        if self._progress is None or reached < self._reported + PROGRESS_EVERY:
            return
        self._reported = reached - reached % PROGRESS_EVERY
        seconds = time.perf_counter() - self._started
        self._progress(
            f"tick {reached:,} of {self.ticks:,} after {seconds:.0f} s "
            f"({reached / seconds:.1f} ticks/s, {(self.ticks - reached) / reached * seconds / 60:.0f} min to go)"
        )

    def _timeout(
        self, attempt: _Attempt, container: _Container, failed: Callable[[], None]
    ) -> None:
        if attempt.ended:
            return
        attempt.timed_out = True
        self.by_request.pop(attempt.request_id, None)  # a timed-out sandbox is not reused
        failed()

    def _retry(self, event: dict[str, Any], request_id: str, number: int) -> None:
        if number < len(LAMBDA_RETRY_DELAYS):
            delay = LAMBDA_RETRY_DELAYS[number]
            self.sim.at(self.clock() + delay, lambda: self._attempt(event, request_id, number + 1))
        else:
            self.dead_letters.append(_destination_record(event, request_id))

    def _container(self, request_id: str, number: int) -> _Container:
        previous = self.by_request.get(request_id)
        if (
            number
            and previous is not None
            and not previous.busy
            and self.rng.random() < RATES["warm"]
        ):
            return previous
        while self.idle:
            candidate = self.idle.pop()
            if not candidate.busy:
                self.by_request[request_id] = candidate
                self.idle.append(candidate)
                return candidate
        container = self._new_container()
        self.idle.append(container)
        self.by_request[request_id] = container
        return container

    def _new_container(self) -> _Container:
        skew = timedelta(
            seconds=self.rng.uniform(-MAX_SKEW_S, MAX_SKEW_S) if self.on("skew") else 0.0
        )
        client = FaultyClient(self.client, self)
        clock = _Skewed(self.clock, skew)
        run_store = RunStore(client, self.table, sleep=self._sleep)
        options: dict[str, Any] = {}
        if "sleep" in inspect.signature(JobGuard).parameters:
            options["sleep"] = self._sleep  # the guard's own retries wait on the simulated clock
        guard = JobGuard(self.settings, run_store, clock, **options)
        return _Container(
            handle=lambda event, context: decorator._handle(guard, self._body, event, context),
            skew=skew,
        )

    def _sleep(self, seconds: float) -> None:
        self.sim.run_until(self.clock() + timedelta(seconds=seconds))

    # --- the job's body --------------------------------------------------------------------

    def _body(self, run: Run) -> None:
        attempt = self.current[-1]
        tick = attempt.tick
        if run.attempt == 1 and tick in self.fail_ticks:
            raise RuntimeError("first attempt fails (chaos soak)")
        if run.attempt == 1 and tick in self.hang_ticks and not attempt.hung:
            # stalls past its deadline and its lease; Lambda times it out meanwhile
            attempt.hung = True
            wake = attempt.deadline + timedelta(seconds=self.rng.uniform(40, 420))
            self.sim.run_until(wake)
        else:
            self.sim.run_until(self.clock() + timedelta(seconds=self.rng.uniform(0.5, 5)))
        if self.broken_guard:  # the guard alone is on trial: its effect unjournaled
            self._write_effect(tick, run, attempt)
            self._completed(tick, run, attempt)
            return
        # The effect is journaled (``run.once``), with the check an author of an effect into a
        # store they can read gives: a hung run whose lease ran out before anyone took the tick
        # over still owns it and records its effect DONE, so its successor skips the effect
        # instead of writing it a second time (its token is newer: a fenced store accepts both).
        try:
            with run.once(EFFECT, check=lambda: tick in self.ledger.last) as first:
                if first:
                    self._write_effect(tick, run, attempt)
        except Fenced:
            if attempt.hung:  # taken over while it hung: the journal refused its late effect
                self.late_refused += 1
                self._completed(tick, run, attempt)  # its work done, but for the effect
            raise
        self._completed(tick, run, attempt)

    def _completed(self, tick: str, run: Run, attempt: _Attempt) -> None:
        attempt.completed_token = run.fencing_token
        self.completions[tick].append(attempt)

    def _write_effect(self, tick: str, run: Run, attempt: _Attempt) -> None:
        accepted = self.ledger.write(tick, run.fencing_token)
        if not accepted and attempt.hung:
            self.late_refused += 1

    # --- the broken guard ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _broken(self) -> Iterator[None]:
        """The claim with its tick condition removed: any claim of any tick wins."""
        original = store._reclaimable

        def anyone(update: Any, expected_attempts: int, now: datetime) -> str:
            return str(update.absent("chaos_soak_never_set"))

        store._reclaimable = anyone  # type: ignore[assignment]
        try:
            yield
        finally:
            store._reclaimable = original  # type: ignore[assignment]

    # --- the verdict --------------------------------------------------------------------------

    def _report(self, seconds: float, redriven: int) -> Report:
        records = {r["scheduled_at"]: r for r in _records(self.client, self.table)}
        ticks = [iso_seconds(START + INTERVAL * (n + 1)) for n in range(self.ticks)]
        lost = mismatches = twice = 0
        causes: Counter[str] = Counter()
        examples: dict[str, list[str]] = defaultdict(list)
        for tick in ticks:
            record = records.get(tick, {})
            done = self.ledger.accepted[tick] > 0
            if not done:
                lost += 1
                examples["lost"].append(tick)
            succeeded = record.get("status") == RunStatus.SUCCEEDED
            if succeeded != done or (done and _effect_token(record) != self.ledger.last[tick]):
                mismatches += 1
                examples["mismatch"].append(f"{tick} {record.get('status')}")
            if self.ledger.accepted[tick] > 1:
                twice += 1
                examples["effects twice"].append(tick)
            runs = self.completions[tick]
            if len(runs) > 1:
                cause = _cause(runs)
                causes[cause] += 1
                examples[cause].append(tick)
        return Report(
            ticks=self.ticks,
            seed=self.seed,
            faults=self.faults,
            broken_guard=self.broken_guard,
            lost=lost,
            second_bodies=causes,
            effects_twice=twice,
            late_writes_refused=self.late_refused,
            mismatches=mismatches,
            requests=_requests(self.client),
            invocations=self.invocations,
            dead_lettered=redriven,
            seconds=seconds,
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            examples={k: v[:5] for k, v in examples.items()},
        )


def _effect_token(record: dict[str, Any]) -> int:
    """The token of the run that did the tick's effect, by Vigil's record: the journal's entry
    (an earlier run may have done it, its successor skipping it), else the record's own."""
    entry = record.get(JOURNAL_ATTRIBUTE, {}).get(EFFECT, {})
    return int(entry.get("fence") or record.get("fencing_token", 0))


def _cause(runs: list[_Attempt]) -> str:
    if any(run.hung for run in runs):
        return HANG_CAUSE
    for fault in reversed(runs[0].write_faults):
        if fault in CAUSES:
            return CAUSES[fault]
    return "unexplained (the guard ran a finished tick again)"


@dataclass
class _Skewed:
    clock: ManualClock
    skew: timedelta

    def __call__(self) -> datetime:
        return self.clock() + self.skew


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


def _tick_of(record: dict[str, Any]) -> str:
    return str(record["requestPayload"][SCHEDULER_INPUT_KEY]["scheduled_time"])


def _destination_record(event: dict[str, Any], request_id: str) -> dict[str, Any]:
    """What Lambda's on-failure destination receives (the redrive hands it back whole)."""
    return {
        "version": "1.0",
        "requestContext": {"requestId": request_id, "condition": "RetriesExhausted"},
        "requestPayload": event.get("requestPayload", event),
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
    }


def _records(client: Any, table: str) -> Iterator[dict[str, Any]]:
    from vigil.dynamo import from_wire, to_wire

    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": to_wire({":pk": store.job_pk(JOB), ":prefix": "TICK#"}),
    }
    while True:
        page = client.query(**kwargs)
        for item in page.get("Items", []):
            yield from_wire(item) or {}
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class _Requests:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, **_: Any) -> None:
        self.count += 1


_COUNTERS: dict[int, _Requests] = {}


def _requests(client: Any) -> int:
    counter = _COUNTERS.get(id(client))
    return counter.count if counter else 0


def count_requests(client: Any) -> None:
    """Count the client's DynamoDB requests from botocore's own events (refused ones too)."""
    counter = _COUNTERS.setdefault(id(client), _Requests())
    client.meta.events.register("before-call.dynamodb.*", counter)


def soak(
    *,
    ticks: int,
    seed: int,
    faults: Sequence[str] = FAULTS,
    broken_guard: bool = False,
    synth: Any = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """One soak in a fresh moto account (``mock_aws``), on the synthesized runs table."""
    import boto3
    from moto import mock_aws

    from vigil_tools.emulator import moto_memory, moto_responses, moto_speed
    from vigil_tools.emulator.template import create_tables, logical_id_of, synthesize

    moto_memory.install()
    moto_speed.install()
    moto_responses.install()
    synth = synth or synthesize()
    with mock_aws():
        client = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            aws_access_key_id="soak",
            aws_secret_access_key="soak",
        )
        table = create_tables(synth, client)[
            logical_id_of(synth, "AWS::DynamoDB::Table", "Vigil/JobRuns")
        ]
        count_requests(client)
        return Soak(
            client,
            table,
            ticks=ticks,
            seed=seed,
            faults=faults,
            broken_guard=broken_guard,
            progress=progress,
        ).run()


# --- the command line and `make bench` -----------------------------------------------------------


@contextlib.contextmanager
def quiet_telemetry() -> Iterator[None]:
    """The code under soak logs and emits metrics on every run: silenced, then put back."""
    logger = telemetry.logger()
    level = logger.log_level
    logger.setLevel("CRITICAL")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)
        telemetry.metrics().clear_metrics()


def positive(option: str) -> Callable[[str], int]:
    """A command line's count (``--ticks``, ``--tasks``): a whole number above zero."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{option} must be a whole number, not {text!r}"
            ) from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{option} must be positive, not {value}")
        return value

    return parse


def fault_names(known: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """A command line's ``--faults a,b``, each one of ``known``."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(name.strip() for name in text.split(",") if name.strip())
        unknown = [name for name in names if name not in known]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown fault {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
            )
        return names

    return parse


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def seed_and_faults(command: argparse.ArgumentParser, known: Sequence[str]) -> None:
    """A soak's ``--seed`` and ``--faults`` (every fault of ``known`` by default)."""
    command.add_argument("--seed", type=int, default=1, help="the faults' random seed")
    command.add_argument(
        "--faults",
        type=fault_names(known),
        default=tuple(known),
        help=f"comma-separated, from: {','.join(known)} (default: all)",
    )


def verdict(report: Any, broken: bool) -> int:
    """Print a soak's report and its examples; the exit code: 0 when its targets held (or,
    with something broken on purpose, when the soak caught it)."""
    print("\n".join(report.lines()))
    for what, found in sorted(report.examples.items()):
        print(f"  e.g. {what}: {'; '.join(found)}")
    if broken:
        return 0 if report.caught else 1
    return 0 if report.held else 1


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m benchmarks.chaos_soak",
        description="Chaos soak of the jobs guard on moto, checked by an independent ledger.",
    )
    command.add_argument(
        "--ticks", type=positive("--ticks"), default=10_000, help="ticks to run (default 10000)"
    )
    seed_and_faults(command, FAULTS)
    command.add_argument(
        "--broken-guard", action="store_true", help="remove the claim's condition: must be caught"
    )
    return command


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report = soak(
        ticks=args.ticks,
        seed=args.seed,
        faults=args.faults,
        broken_guard=args.broken_guard,
        progress=to_stderr,
    )
    print("\n".join(report.lines()))
    for what, ticks in sorted(report.examples.items()):
        print(f"  e.g. {what}: {', '.join(ticks)}")
    if args.broken_guard:
        return 0 if report.caught else 1
    return 0 if report.effects_twice == 0 and report.lost == 0 and not report.mismatches else 1


SEEDS = (1, 2)
BENCH_TICKS = 10_000


def run(ticks: int = BENCH_TICKS, seeds: Sequence[int] = SEEDS) -> str:
    """The benchmarks page's table: the soak at ``ticks`` with each seed, then the broken guard."""
    from vigil_tools.emulator.template import synthesize

    synth = synthesize()
    reports = [soak(ticks=ticks, seed=seed, synth=synth) for seed in seeds]
    broken = soak(ticks=min(ticks, 1_000), seed=seeds[0], broken_guard=True, synth=synth)
    header = "| | " + " | ".join(f"seed {r.seed}" for r in reports) + " | broken guard |"
    rows = [
        header,
        "|---|" + "---:|" * (len(reports) + 1),
    ]

    def row(name: str, value: Callable[[Report], Any]) -> None:
        rows.append(f"| {name} | " + " | ".join(str(value(r)) for r in [*reports, broken]) + " |")

    row("ticks", lambda r: f"{r.ticks:,}")
    row("ticks lost", lambda r: r.lost)
    for cause in sorted({c for r in [*reports, broken] for c in r.second_bodies}):
        row(f"second bodies: {cause}", lambda r, c=cause: r.second_bodies.get(c, 0))
    row("effects accepted twice (target 0)", lambda r: r.effects_twice)
    row("late writes refused by the token check", lambda r: r.late_writes_refused)
    row("record/ledger mismatches", lambda r: r.mismatches)
    row("dead-lettered, then redriven", lambda r: r.dead_lettered)
    row("DynamoDB requests per tick", lambda r: f"{r.requests_per_tick:.2f}")
    row("invocations per tick", lambda r: f"{r.invocations / r.ticks:.2f}")
    row("ticks per second", lambda r: f"{r.ticks_per_second:.0f}")
    row("peak RSS (MB)", lambda r: f"{r.peak_rss_mb:.0f}")
    return "\n".join(rows) + (
        f"\n\nAll faults on ({', '.join(FAULTS)}); `python -m benchmarks.chaos_soak --ticks N "
        "--seed S [--faults a,b] [--broken-guard]` reruns one. The broken guard has the claim's "
        "tick condition removed; the soak catches it by its effects accepted twice."
    )


if __name__ == "__main__":
    sys.exit(main())
