"""The tasks chaos soak extended to flows: flows with steps, a sleep, a wait raced by its signal,
a map over children and compensable steps, under the tasks soak's faults, checked by counting
every step body, compensation and child body from the bodies themselves.

It runs on the tasks soak's machinery (``benchmarks/tasks_soak.py``: moto under a simulated clock
that moto's SQS reads, the event source played as Lambda's SQS mapping plays it, warm containers,
kills at any request, throttles past botocore's retries, applied writes whose answers are lost,
duplicate deliveries, lapsed visibilities, failed deletes, clock skew) with two tasks: ``flow`` and
its children ``child``, both on standard queues. Each flow::

    reserve (a step, compensate: release) -> sleep 60 s -> wait_for("approve", timeout=60 s)
    -> map("resize", child, 3 payloads) -> charge (a step, compensate: refund) -> ship (a step)

Its fate: ``ok``; ``flaky`` (charge raises on its first execution); ``silent`` (no signal: the
wait times out); ``abort`` (ship raises ``Abort``: the flow compensates, charge then reserve);
``poison`` (ship always raises: the retries spent, the flow compensates). The application signals
every flow that is not silent at a moment drawn around the wait's timeout (some before the wait
is reached, some after its timeout: the race), a fifth of them twice. A tenth of the children
raise on their first execution.

Faults added to the tasks soak's: ``kill`` also kills inside a step's or a compensation's body
(and hangs one past the deadline); ``resume-twice`` sends a flow's resume message (a wake-up
after a sleep, a signal's, a last child's) a second time. Every body counts its own execution in
the ledger (its start, its run's token, the invocation's faults before and after it returned);
Vigil's records are read only to be judged against it. Targets: 0 flows lost (each ends as its
fate says), 0 steps or children run again except after an execution that raised or died (each
repeat counted under its cause: the step raised; its invocation died inside it; it returned but
its invocation died, or its result's write was throttled, before the result was recorded),
0 compensations run twice or out of order or missing, 0 waits with two outcomes (an accepted
signal is what the wait returns; a refused one means it timed out), 0 maps whose results differ
from the children's, 0 children enqueued twice or lost, 0 stranded.

    python -m benchmarks.flows_soak --flows 100 --seed 1 [--faults a,b] [--broken-journal]

``--broken-journal`` makes every execution read an empty journal (finished steps forgotten): the
counters must catch it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import resource
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from benchmarks.chaos_soak import (
    Killed,
    positive,
    quiet_telemetry,
    seed_and_faults,
    to_stderr,
    verdict,
)
from benchmarks.tasks_ledger import Invocation, grid
from benchmarks.tasks_soak import (
    FAULTS as TASK_FAULTS,
)
from benchmarks.tasks_soak import (
    RATES as TASK_RATES,
)
from benchmarks.tasks_soak import (
    RETRIES,
    START,
    TABLE,
    Config,
    Faulty,
    TasksSoak,
    _count_events,
    moto_clock,
    soak_account,
)
from vigil.contract.flows import StepField, StepState
from vigil.contract.tasks import FINAL_STATUSES, TaskStatus
from vigil.tasks import TaskRun
from vigil.tasks.audit import audit
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.errors import TaskNotFound
from vigil.tasks.flows.errors import Abort, SignalRefused, SignalTimeout
from vigil.tasks.flows.fanout import child_id
from vigil.tasks.flows.journal import FlowJournal
from vigil.tasks.store import TaskStore

FLOW, CHILD = "flow", "child"
FAULTS = (
    *(fault for fault in TASK_FAULTS if fault != "cancel"),
    "resume-twice",
)
"""The tasks soak's faults but cancels (a flow's cancel is its own work), and resumes twice."""
RATES = TASK_RATES | {
    "kill-step": 0.02,  # per step, compensation or child body: its invocation dies inside it
    "hang": 0.01,  # per body: it hangs past the deadline
    "resume-twice": 0.15,  # per resume message a function sends: a second copy
    "signal-twice": 0.2,  # per signalled flow: the same signal again (the same key)
    "flaky-child": 0.1,  # per child: raises on its first execution
}
FATES = {"ok": 0.55, "flaky": 0.15, "silent": 0.1, "abort": 0.1, "poison": 0.1}
EXPECTED = {
    "ok": TaskStatus.SUCCEEDED,
    "flaky": TaskStatus.SUCCEEDED,
    "silent": TaskStatus.SUCCEEDED,
    "abort": TaskStatus.COMPENSATED,
    "poison": TaskStatus.COMPENSATED,
}
SPACING = timedelta(seconds=5)
NAP = timedelta(seconds=60)
WAIT = timedelta(seconds=60)
CHILDREN = 3
ALWAYS = 10**9
"""A poison step's failures: every execution raises."""
COMPENSABLE = ("reserve", "charge")
"""The flow's compensable steps in their order: compensated in reverse."""
ENDED_UNCERTAIN = (
    "FAILED: a compensation died before it was recorded, not run again (CompensationFailed)"
)
UNEXPLAINED = "unexplained (it had finished)"
OVERLAP = "unexplained (two executions at once)"
F = StepField


@dataclass
class Execution:
    """One execution of a body: a step's, a compensation's (``undo:<step>``) or a child's."""

    key: str
    unit: str
    token: int
    start: datetime
    invocation: Invocation
    outcome: str = "died"
    """returned, raised, or died (its invocation killed inside it)."""
    end: datetime | None = None
    faults_at_end: int = 0
    """How many faults its invocation had met when it returned: the ones after explain a repeat."""


@dataclass
class FlowsLedger:
    executions: dict[tuple[str, str], list[Execution]] = field(
        default_factory=lambda: defaultdict(list)
    )
    order: list[tuple[str, str]] = field(default_factory=list)
    """Every execution's (key, unit), in the order they started."""
    waits: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """A flow's wait outcomes, as each execution past the wait saw it (JSON; null: timed out)."""
    maps: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    signal_accepted: set[str] = field(default_factory=set)
    signal_refused: set[str] = field(default_factory=set)


@dataclass
class FlowsReport:
    flows: int
    seed: int
    faults: tuple[str, ...]
    broken_journal: bool
    outcomes: Counter[str]
    lost: int
    wrong_end: int
    explained_ends: Counter[str]
    """Flows that ended other than their fate says, for a reason the ledger shows."""
    repeats: Counter[str]
    """Second (and later) executions of a step or a child by the cause of the one before."""
    executions: Counter[str]
    """Executions by kind (step, compensation, child) and outcome."""
    compensations_twice: int
    compensations_missing: int
    compensations_out_of_order: int
    waits_disagreeing: int
    signals: Counter[str]
    maps_wrong: int
    journal_disagreeing: int
    children_extra: int
    children_lost: int
    stranded: int
    requests: Counter[str]
    invocations: int
    seconds: float
    peak_rss_mb: float
    examples: dict[str, list[str]]

    @property
    def unexplained(self) -> int:
        return self.repeats.get(UNEXPLAINED, 0) + self.repeats.get(OVERLAP, 0)

    @property
    def held(self) -> bool:
        return not (
            self.lost
            or self.wrong_end
            or self.unexplained
            or self.compensations_twice
            or self.compensations_missing
            or self.compensations_out_of_order
            or self.waits_disagreeing
            or self.maps_wrong
            or self.journal_disagreeing
            or self.children_extra
            or self.children_lost
            or self.stranded
        )

    @property
    def caught(self) -> bool:
        """The broken journal's reruns were seen."""
        return bool(self.unexplained or self.journal_disagreeing)

    def per_flow(self, prefix: str) -> float:
        return sum(v for k, v in self.requests.items() if k.startswith(prefix)) / self.flows

    def lines(self) -> list[str]:
        def show(counter: Counter[str]) -> str:
            return ", ".join(f"{k}: {n}" for k, n in sorted(counter.items())) or "none"

        return [
            f"flows {self.flows} ({CHILDREN} children each), seed {self.seed}, faults "
            f"{','.join(self.faults) or 'none'}"
            + (", BROKEN JOURNAL" if self.broken_journal else ""),
            f"flows at the end: {show(self.outcomes)}",
            f"flows lost: {self.lost}; ended other than their fate says: {self.wrong_end} "
            f"(explained: {show(self.explained_ends)})",
            f"executions: {show(self.executions)}",
            f"repeats by cause: {show(self.repeats)}",
            f"compensations run twice: {self.compensations_twice}; missing: "
            f"{self.compensations_missing}; out of order: {self.compensations_out_of_order}",
            f"signals: {show(self.signals)}; waits with two outcomes or against their signal: "
            f"{self.waits_disagreeing}",
            f"maps whose results differ from the children's: {self.maps_wrong}",
            f"steps whose recorded result is not their last execution's: "
            f"{self.journal_disagreeing}",
            f"children enqueued beyond their map: {self.children_extra}; lost: "
            f"{self.children_lost}",
            f"stranded (the audit): {self.stranded}",
            f"requests per flow: DynamoDB {self.per_flow('function dynamodb'):.1f} "
            f"(+ application {self.per_flow('application dynamodb'):.1f}), SQS "
            f"{self.per_flow('function sqs'):.1f} (+ event source "
            f"{self.per_flow('event source sqs'):.1f}); invocations per flow "
            f"{self.invocations / max(self.flows, 1):.1f}",
            f"{self.seconds:.0f} s; peak RSS {self.peak_rss_mb:.0f} MB",
        ]


class SerialClient(TaskClient):
    """A map's TaskClient writing its children's records one at a time: ``enqueue_many``'s
    thread pool would draw the faults in the threads' order, and the soak would not repeat."""

    def enqueue_many(self, *args: Any, **kwargs: Any) -> Any:
        return super().enqueue_many(*args, **{**kwargs, "workers": 1})


class FlowsSoak(TasksSoak):
    QUEUES = (FLOW, CHILD)

    def __init__(
        self,
        clients: dict[str, Any],
        config: Config,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(clients, config, progress)
        self.flows = FlowsLedger()

    # --- faults --------------------------------------------------------------------------------

    def chance(self, fault: str, rate: str | None = None) -> bool:
        return self.on(fault) and self.rng.random() < RATES[rate or fault]

    def call(
        self, service: str, name: str, method: Any, kwargs: dict[str, Any], *, kills: bool
    ) -> Any:
        """The tasks soak's request with faults; a function's send wakes its queue's poller,
        and a resume message to a flow may be sent twice."""
        answer = super().call(service, name, method, kwargs, kills=kills)
        if service == "sqs" and kills and name in ("send_message", "send_message_batch"):
            queue = FLOW if kwargs["QueueUrl"] == self.catalog.spec(FLOW).queue_url else CHILD
            if not self._stopped:
                self._wake(queue, timedelta(seconds=int(kwargs.get("DelaySeconds", 0)) + 1))
            if name == "send_message" and queue == FLOW and self.chance("resume-twice"):
                copy = dict(kwargs)
                at = self.clock() + timedelta(seconds=self.rng.uniform(0.5, 30))
                self._later(at, lambda: self.clients["harness sqs"].send_message(**copy))
        return answer

    # --- the functions -------------------------------------------------------------------------

    def _body_of(self, name: str) -> Callable[[Any, Any], Any]:
        return self._flow if name == FLOW else self._child

    def _children(self, clock: Callable[[], datetime]) -> TaskClient | None:
        return SerialClient(
            self.catalog,
            sqs=Faulty(self.clients["function sqs"], self, "sqs", kills=True),
            dynamodb=Faulty(self.clients["function dynamodb"], self, "dynamodb", kills=True),
            s3=self.clients["function s3"],
            clock=clock,
            sleep=self._sleep,
        )

    # --- the application -----------------------------------------------------------------------

    def _schedule_tasks(self) -> None:
        for n in range(self.tasks):
            at = START + SPACING * (n + 1)
            key = f"f{n:05d}-{self.rng.getrandbits(24):06x}"
            fate = self.rng.choices(list(FATES), weights=list(FATES.values()))[0]
            self.fate[key] = fate
            self._task_of[key] = FLOW
            self._later(at, self._enqueuer(FLOW, key, None, None))
            if self.chance("enqueue-twice"):
                self._later(at, self._enqueuer(FLOW, key, None, None))
            if fate == "silent":
                continue
            # Around the wait's timeout: the wait is armed about NAP after the enqueue.
            signal_at = at + NAP + timedelta(seconds=self.rng.uniform(-20, WAIT.seconds + 30))
            self._later(signal_at, self._signaller(key, tries=5))
            if self.rng.random() < RATES["signal-twice"]:
                again = signal_at + timedelta(seconds=self.rng.uniform(0, 10))
                self._later(again, self._signaller(key, tries=5))

    def _signaller(self, key: str, tries: int) -> Callable[[], None]:
        def signal() -> None:
            try:
                self.app.signal(FLOW, key, "approve", {"approved": key})
            except SignalRefused:
                self.flows.signal_refused.add(key)
                return
            except (TaskNotFound, ClientError, BotoCoreError):
                # Not recorded yet (its enqueue's record write retried), throttled, or applied
                # with its answer lost: the application tries again (the same key: once).
                if tries > 1:
                    self._later(
                        self.clock() + timedelta(seconds=2), self._signaller(key, tries - 1)
                    )
                return
            self.flows.signal_accepted.add(key)

        return signal

    # --- the bodies ----------------------------------------------------------------------------

    def _flow(self, run: TaskRun, payload: dict[str, Any]) -> Any:
        key, fate = run.id, payload["fate"]
        run.step("reserve", self._work(run, "reserve"), compensate=self._undo(run, "reserve"))
        run.sleep("cool", NAP)
        try:
            approval = run.wait_for("approve", timeout=WAIT)
        except SignalTimeout:
            approval = None
        self.flows.waits[key].add(json.dumps(approval, sort_keys=True))
        children = [{"i": i, "flaky": _flaky_child(key, i)} for i in range(CHILDREN)]
        results = run.map("resize", CHILD, children)
        self.flows.maps[key].add(json.dumps(results, sort_keys=True))
        fails = 1 if fate == "flaky" else 0
        run.step("charge", self._work(run, "charge", fails), compensate=self._undo(run, "charge"))
        ship = self._work(run, "ship", ALWAYS if fate == "poison" else 0, fate == "abort")
        run.step("ship", ship)
        return {"shipped": key}

    def _work(
        self, run: TaskRun, step: str, fails: int = 0, aborts: bool = False
    ) -> Callable[[], Any]:
        def body() -> Any:
            with self._execution(run, step) as execution:
                raised = sum(e.outcome == "raised" for e in self._of(run.id, step))
                if aborts:
                    raise Abort(f"{step}: refused (soak)")
                if raised < fails:
                    raise RuntimeError(f"{step}: failed (soak, {raised + 1} of {fails})")
                execution.outcome = "returned"
                return {"step": step, "by": run.fencing_token}

        return body

    def _undo(self, run: TaskRun, step: str) -> Callable[[Any], None]:
        def undo(result: Any) -> None:
            with self._execution(run, f"undo:{step}") as execution:
                execution.outcome = "returned"

        return undo

    def _child(self, run: TaskRun, payload: dict[str, Any]) -> Any:
        with self._execution(run, "child") as execution:
            raised = sum(e.outcome == "raised" for e in self._of(run.id, "child"))
            if payload["flaky"] and not raised:
                raise RuntimeError("the child failed (soak)")
            execution.outcome = "returned"
            return {"i": payload["i"], "by": run.id}

    @contextlib.contextmanager
    def _execution(self, run: TaskRun, unit: str) -> Iterator[Execution]:
        """One body's execution counted from inside it: it may die there (a kill, a hang past
        the deadline), take time (other invocations go on meanwhile), raise or return."""
        invocation = self.current[-1]
        execution = Execution(run.id, unit, run.fencing_token, self.clock(), invocation)
        self.flows.executions[(run.id, unit)].append(execution)
        self.flows.order.append((run.id, unit))
        try:
            if self.chance("kill", "kill-step"):
                self._die(invocation, f"killed inside {unit}")
            if self.chance("kill", "hang"):
                self._wait((invocation.deadline - self.clock()).total_seconds() + 60, invocation)
            self._wait(self.rng.uniform(0.1, 1.0), invocation)
            yield execution
        except Killed:
            raise
        except BaseException:
            execution.outcome = "raised"
            raise
        finally:
            execution.end = min(self.clock(), invocation.deadline)
            execution.faults_at_end = len(invocation.faults)

    def _of(self, key: str, unit: str) -> list[Execution]:
        return self.flows.executions[(key, unit)]

    # --- the run ---------------------------------------------------------------------------------

    def run(self) -> FlowsReport:  # type: ignore[override]
        self._started = time.perf_counter()
        self._schedule_tasks()
        with quiet_telemetry(), _forgetful() if self.broken_guard else contextlib.nullcontext():
            self._drain()
        self.clock.advance(timedelta(days=1))  # every retry's bound is past: audit it all
        with quiet_telemetry():
            stranded = audit(
                self.catalog,
                lambda spec: TaskStore(self.clients["operator dynamodb"], TABLE),
                self.clock(),
            )
        return self._flows_report(time.perf_counter() - self._started, len(stranded))

    # --- the verdict ---------------------------------------------------------------------------

    def _flows_report(self, seconds: float, stranded: int) -> FlowsReport:
        dynamodb = self.clients["harness dynamodb"]
        store = TaskStore(dynamodb, TABLE)
        examples: dict[str, list[str]] = defaultdict(list)
        counts: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        ends: Counter[str] = Counter()
        repeats: Counter[str] = Counter()
        executions: Counter[str] = Counter()
        final = {s.value for s in FINAL_STATUSES}
        for (key, unit), runs in self.flows.executions.items():
            kind = "compensation" if unit.startswith("undo:") else unit if unit == CHILD else "step"
            for execution in runs:
                executions[f"{kind} {execution.outcome}"] += 1
            if kind == "compensation":
                continue
            for earlier, later in itertools.pairwise(runs):
                why = _cause(earlier, later)
                repeats[why] += 1
                examples[why].append(f"{key} {unit} tokens {earlier.token}, {later.token}")
        expected_children: set[str] = set()
        for key, fate in self.fate.items():
            record = store.item(FLOW, key) or {}
            status = str(record.get("status", "none"))
            outcomes[status] += 1
            if status not in final:
                counts["lost"] += 1
                examples["lost"].append(f"{key} {status}")
            elif status != EXPECTED[fate].value and (why := self._explained(key, record, store)):
                ends[why] += 1
            elif status != EXPECTED[fate].value:
                counts["wrong end"] += 1
                examples["wrong end"].append(f"{key} {fate}: {status} {record.get('error_type')}")
            journal = FlowJournal(dynamodb, TABLE, FLOW, key).read()
            self._judge_steps(key, journal, counts, examples)
            self._judge_compensations(key, status, journal, counts, examples)
            self._judge_wait(key, counts, examples)
            ids = [child_id(key, "resize", i) for i in range(CHILDREN)]
            if self.flows.maps.get(key):
                expected_children.update(ids)
                wanted = json.dumps([{"by": c, "i": i} for i, c in enumerate(ids)], sort_keys=True)
                if self.flows.maps[key] != {wanted}:
                    counts["maps wrong"] += 1
                    examples["map wrong"].append(f"{key}: {sorted(self.flows.maps[key])}")
        children = {str(item["sk"]): item for item in _records(dynamodb, CHILD)}
        every = {child_id(key, "resize", i) for key in self.fate for i in range(CHILDREN)}
        for task_id, item in children.items():
            if task_id not in every:
                counts["children extra"] += 1
                examples["child extra"].append(task_id)
            if item.get("status") not in final:
                counts["children lost"] += 1
                examples["child lost"].append(f"{task_id} {item.get('status')}")
        missing = expected_children - set(children)
        counts["children lost"] += len(missing)
        examples["child lost"].extend(sorted(missing))
        signals = Counter(
            {
                "accepted": len(self.flows.signal_accepted),
                "refused (timed out)": len(self.flows.signal_refused - self.flows.signal_accepted),
                "won against the timeout after it was due": self._late_winners(),
            }
        )
        return FlowsReport(
            flows=len(self.fate),
            seed=self.seed,
            faults=self.faults,
            broken_journal=self.broken_guard,
            outcomes=outcomes,
            lost=counts["lost"],
            wrong_end=counts["wrong end"],
            explained_ends=ends,
            repeats=repeats,
            executions=executions,
            compensations_twice=counts["compensations twice"],
            compensations_missing=counts["compensations missing"],
            compensations_out_of_order=counts["compensations out of order"],
            waits_disagreeing=counts["waits"],
            signals=signals,
            maps_wrong=counts["maps wrong"],
            journal_disagreeing=counts["journal"],
            children_extra=counts["children extra"],
            children_lost=counts["children lost"],
            stranded=stranded,
            requests=self.requests,
            invocations=self.invocations,
            seconds=seconds,
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            examples={k: v[:5] for k, v in examples.items() if v},
        )

    def _judge_steps(
        self,
        key: str,
        journal: dict[str, Any],
        counts: Counter[str],
        examples: dict[str, list[str]],
    ) -> None:
        """A step recorded DONE holds its last returned execution's result: an execution after
        the one whose result was recorded is a rerun of a finished step."""
        for step in (*COMPENSABLE, "ship"):
            item = journal.get(step) or {}
            if item.get(F.STATE) != StepState.DONE:
                continue
            returned = [e for e in self._of(key, step) if e.outcome == "returned"]
            by = json.loads(str(item[F.RESULT])).get("by")
            if not returned or returned[-1].token != by:
                counts["journal"] += 1
                examples["journal"].append(
                    f"{key} {step}: recorded by {by}, ran {[e.token for e in returned]}"
                )

    def _judge_compensations(
        self,
        key: str,
        status: str,
        journal: dict[str, Any],
        counts: Counter[str],
        examples: dict[str, list[str]],
    ) -> None:
        ran = [unit for k, unit in self.flows.order if k == key and unit.startswith("undo:")]
        twice = [unit for unit, n in Counter(ran).items() if n > 1]
        if twice:
            counts["compensations twice"] += len(twice)
            examples["compensation twice"].append(f"{key} {twice}")
        if status != TaskStatus.COMPENSATED.value:
            if ran and status == TaskStatus.SUCCEEDED.value:
                counts["compensations missing"] += 1  # compensated, yet not said so
                examples["compensation unrecorded"].append(f"{key} {status} ran {ran}")
            return
        done = [s for s in COMPENSABLE if (journal.get(s) or {}).get(F.STATE) == StepState.DONE]
        wanted = [f"undo:{s}" for s in reversed(done)]
        firsts = list(dict.fromkeys(ran))
        if set(firsts) != set(wanted):
            counts["compensations missing"] += 1
            examples["compensation missing"].append(f"{key} ran {firsts}, wanted {wanted}")
        elif firsts != wanted:
            counts["compensations out of order"] += 1
            examples["compensation order"].append(f"{key} ran {firsts}, wanted {wanted}")

    def _explained(self, key: str, record: dict[str, Any], store: TaskStore) -> str:
        """Why a flow ended other than its fate says, when the ledger or the records show a
        fault behind it ("" when nothing does)."""
        error = record.get("error_type")
        status = record.get("status")
        if status == TaskStatus.FAILED.value and error == "CompensationFailed":
            undone = [
                e
                for (k, unit), runs in self.flows.executions.items()
                if k == key and unit.startswith("undo:")
                for e in runs
            ]
            if any(e.outcome == "died" or _faulted_after(e) for e in undone):
                return ENDED_UNCERTAIN
        if status == TaskStatus.COMPENSATED.value and error == "RunCrashed":
            return "COMPENSATED: its attempts kept dying (RunCrashed)"
        if status == TaskStatus.FAILED.value and error == "RunCrashed":
            journal = FlowJournal(store.client, TABLE, FLOW, key).read()
            if not any((journal.get(s) or {}).get(F.STATE) == StepState.DONE for s in COMPENSABLE):
                return "FAILED: its attempts kept dying before a compensable step finished"
        if status == TaskStatus.COMPENSATED.value and error == "ChildFailed":
            spent = [
                child
                for i in range(CHILDREN)
                if (child := store.item(CHILD, child_id(key, "resize", i)) or {})
                and child.get("status") == TaskStatus.FAILED.value
                and int(child.get("attempts", 0)) > RETRIES
            ]
            if spent:
                return "COMPENSATED: a child's retries spent by the faults (ChildFailed)"
        return ""

    def _judge_wait(self, key: str, counts: Counter[str], examples: dict[str, list[str]]) -> None:
        seen = self.flows.waits.get(key, set())
        signalled = json.dumps({"approved": key}, sort_keys=True)
        wrong = len(seen) > 1
        if key in self.flows.signal_accepted:
            wrong = wrong or seen - {signalled} != set()
        elif key in self.flows.signal_refused:
            wrong = wrong or seen - {"null"} != set()
        if wrong:
            counts["waits"] += 1
            examples["wait"].append(f"{key}: saw {sorted(seen)}")

    def _late_winners(self) -> int:
        """Signals accepted after their wait's timeout was due (the flow had not woken to time
        it out yet): the race the wait's single outcome decides."""
        store = self.clients["harness dynamodb"]
        late = 0
        for key in self.flows.signal_accepted:
            item = FlowJournal(store, TABLE, FLOW, key).read().get("approve") or {}
            if F.UNTIL in item and F.SIGNALLED_AT in item:
                late += str(item[F.SIGNALLED_AT]) > str(item[F.UNTIL])
        return late


def _cause(earlier: Execution, later: Execution) -> str:
    """Why a body ran again after ``earlier``: it raised, it died inside, or it returned and its
    invocation met a fault before its outcome was recorded; else nothing explains it."""
    if earlier.end is not None and later.start < earlier.end:
        return OVERLAP
    if earlier.outcome == "raised":
        return "retried: the body raised"
    if earlier.outcome == "died":
        return "retried: its invocation died inside it"
    after = [f for f in earlier.invocation.faults[earlier.faults_at_end :] if f != "applied-error"]
    if after and after[0] == "throttle":
        return "retried: its outcome's write throttled past botocore's retries"
    if _faulted_after(earlier):
        return "retried: its invocation died before its outcome was recorded"
    return UNEXPLAINED


def _faulted_after(execution: Execution) -> bool:
    """Its invocation met a fault (other than an applied write) after it returned, or died."""
    after = execution.invocation.faults[execution.faults_at_end :]
    return execution.invocation.killed or any(f != "applied-error" for f in after)


def _flaky_child(key: str, index: int) -> bool:
    return zlib.crc32(f"{key}.{index}".encode()) % 1000 < RATES["flaky-child"] * 1000


def _records(client: Any, task: str) -> Iterator[dict[str, Any]]:
    from vigil.dynamo import paginate, to_wire

    request = {
        "TableName": TABLE,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": to_wire({":pk": f"TASK#{task}"}),
    }
    yield from paginate(client.query, request)


@contextlib.contextmanager
def _forgetful() -> Iterator[None]:
    """Every execution reads an empty journal: finished steps are forgotten (and run again)."""
    original = FlowJournal.read
    FlowJournal.read = lambda self: {}  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        FlowJournal.read = original  # type: ignore[method-assign]


def soak(
    *,
    flows: int,
    seed: int,
    faults: Sequence[str] = FAULTS,
    broken_journal: bool = False,
    progress: Callable[[str], None] | None = None,
) -> FlowsReport:
    """One flows soak in a fresh moto account."""
    with soak_account(seed) as (clients, requests):
        run = FlowsSoak(clients, Config(flows, seed, tuple(faults), broken_journal), progress)
        run.requests = requests
        _count_events(run, requests)
        with moto_clock(run.clock):
            return run.run()


# --- the command line and `make bench` ---------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m benchmarks.flows_soak",
        description="Chaos soak of flows on the emulator, counted from the bodies themselves.",
    )
    command.add_argument(
        "--flows",
        type=positive("--flows"),
        default=BENCH_FLOWS,
        help=f"flows (default {BENCH_FLOWS})",
    )
    seed_and_faults(command, FAULTS)
    command.add_argument(
        "--broken-journal", action="store_true", help="forget finished steps: must be caught"
    )
    return command


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report = soak(
        flows=args.flows,
        seed=args.seed,
        faults=args.faults,
        broken_journal=args.broken_journal,
        progress=to_stderr,
    )
    return verdict(report, args.broken_journal)


SEEDS = (1, 2)
BENCH_FLOWS = 100


def run(flows: int = BENCH_FLOWS, seeds: Sequence[int] = SEEDS) -> str:
    """The benchmarks page's table: the soak with each seed, then the broken journal."""
    reports = [soak(flows=flows, seed=seed) for seed in seeds]
    broken = soak(flows=min(flows, 30), seed=seeds[0], broken_journal=True)
    for report in [*reports, broken]:  # what each count is made of, in the run's log
        to_stderr("\n".join(report.lines()))
        for what, found in sorted(report.examples.items()):
            to_stderr(f"  e.g. {what}: {'; '.join(found)}")
    return table([*reports, broken]) + "\n\n" + NOTES


def table(reports: Sequence[FlowsReport]) -> str:
    def label(r: FlowsReport) -> str:
        return "broken journal" if r.broken_journal else f"seed {r.seed}"

    rows, row = grid(reports, label)
    row("flows", lambda r: f"{r.flows:,}")
    for status in sorted({s for r in reports for s in r.outcomes}):
        row(f"flows {status} at the end", lambda r, s=status: r.outcomes.get(s, 0))
    row("**flows lost** (target 0)", lambda r: r.lost)
    row("**ended other than their fate says, unexplained** (target 0)", lambda r: r.wrong_end)
    for why in sorted({w for r in reports for w in r.explained_ends}):
        row(f"ended {why}", lambda r, w=why: r.explained_ends.get(w, 0))
    for kind in sorted({k for r in reports for k in r.executions}):
        row(f"executions: {kind}", lambda r, k=kind: r.executions.get(k, 0))
    for cause in sorted({c for r in reports for c in r.repeats}):
        target = " (target 0)" if cause in (UNEXPLAINED, OVERLAP) else ""
        row(f"ran again, {cause}{target}", lambda r, c=cause: r.repeats.get(c, 0))
    row("**compensations run twice** (target 0)", lambda r: r.compensations_twice)
    row("**compensations missing** (target 0)", lambda r: r.compensations_missing)
    row("**compensations out of order** (target 0)", lambda r: r.compensations_out_of_order)
    for what in sorted({s for r in reports for s in r.signals}):
        row(f"signals {what}", lambda r, w=what: r.signals.get(w, 0))
    row(
        "**waits with two outcomes, or against their signal** (target 0)",
        lambda r: r.waits_disagreeing,
    )
    row("**maps whose results differ from the children's** (target 0)", lambda r: r.maps_wrong)
    row(
        "**steps whose recorded result is not their last run's** (target 0)",
        lambda r: r.journal_disagreeing,
    )
    row("**children enqueued beyond their map** (target 0)", lambda r: r.children_extra)
    row("**children lost** (target 0)", lambda r: r.children_lost)
    row("**stranded, found by the audit** (target 0)", lambda r: r.stranded)
    row(
        "DynamoDB requests per flow (functions)", lambda r: f"{r.per_flow('function dynamodb'):.1f}"
    )
    row("SQS requests per flow (functions)", lambda r: f"{r.per_flow('function sqs'):.1f}")
    row(
        "invocations per flow (flow and children)",
        lambda r: f"{r.invocations / max(r.flows, 1):.1f}",
    )
    row("seconds", lambda r: f"{r.seconds:.0f}")
    row("peak RSS (MB)", lambda r: f"{r.peak_rss_mb:.0f}")
    return "\n".join(rows)


NOTES = (
    f"Each flow: a compensable step, a sleep of {NAP.seconds} s, a wait of {WAIT.seconds} s "
    f"raced by its signal (sent around the timeout, a fifth twice), a map over {CHILDREN} "
    "children, a compensable step, a last step; fates: "
    + ", ".join(f"{fate} {share:.0%}" for fate, share in FATES.items())
    + f". Faults ({', '.join(FAULTS)}) at the tasks soak's rates, plus a kill inside "
    f"{RATES['kill-step']:.0%} of the bodies (steps, compensations, children), a hang past the "
    f"deadline in {RATES['hang']:.0%}, and a second copy of {RATES['resume-twice']:.0%} of the "
    f"resume messages. Retries {RETRIES}. Executions are counted by the bodies themselves; a "
    "repeat is explained by what happened to the execution before it. "
    "`python -m benchmarks.flows_soak --flows N --seed S [--faults a,b] [--broken-journal]` "
    "reruns one. The broken journal forgets every finished step: the soak catches it by its "
    "unexplained repeats."
)


if __name__ == "__main__":
    sys.exit(main())
