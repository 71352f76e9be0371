"""The observers part of ``make demo``: the deployed ObserverFleet, driven as an operator and ECS would.

Everything runs against the stack the emulator deployed: the API and reconciler functions (invoked
in-process with their deployed configuration), the registry table, the cluster and the task
definition. The ``vigil`` CLI talks to the API handler; the registry's stream reaches the
reconciler as its event source mapping would; the reconciler's RunTask/StopTask go to moto's ECS;
each started task's container is the observer runtime, run in-process with the environment ECS
would give it; and the ECS Task State Change events moto does not send are built as AWS documents
them. Time is the caller's frozen clock: the story covers two simulated minutes in about two seconds.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from moto.moto_api import state_manager

from vigil.dynamo import from_wire
from vigil.observers.registry import ObserverRegistry
from vigil_tools.api_client import InProcessTransport
from vigil_tools.cli import main as vigil
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.ecs import (
    ObserverContainer,
    TaskEvents,
    container_environment,
    describe_task,
)
from vigil_tools.emulator.fleet import DeployedFleet
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.emulator.rules import scheduled_event
from vigil_tools.emulator.streams import StreamMappings
from vigil_tools.lambda_context import LambdaContext

KIND = "ticker"
WATCHES = {
    "btc-watch": {"symbol": "BTC-USD", "interval_seconds": 10},
    "eth-watch": {"symbol": "ETH-USD", "interval_seconds": 10},
}
TICK = timedelta(seconds=10)
"""The tickers' interval: the demo moves the clock by one and lets every live container run."""


@dataclass
class Story:
    """The moving parts of one run, and the facts it collects."""

    account: LocalAccount
    runtime: LocalLambda
    frozen: Any
    out: Callable[[str], None]
    fleet: DeployedFleet
    stream: StreamMappings
    log_dir: Path | None
    containers: dict[str, ObserverContainer] = field(default_factory=dict)
    """Live and finished containers by task ARN."""
    versions: dict[str, int] = field(default_factory=dict)
    """The last ``detail.version`` ECS reported per task."""
    logs: list[IO[str]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    # -- the operator's side: the vigil CLI against the deployed API function ----------------------

    def vigil(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = vigil(list(argv), transport=self._transport, stdout=out, stderr=err)
        return code, out.getvalue().strip(), err.getvalue().strip()

    def vigil_json(self, *argv: str) -> Any:
        code, out, err = self.vigil("--json", *argv)
        if code != 0:
            raise RuntimeError(f"vigil {' '.join(argv)} failed ({code}): {err}")
        return json.loads(out)

    @property
    def _transport(self) -> InProcessTransport:
        def handler(event: dict[str, Any], _context: LambdaContext) -> dict[str, Any]:
            return dict(self.invoke(self.fleet.api_function, event))

        return InProcessTransport(handler)

    # -- AWS's side: Lambda invocations, the stream, ECS --------------------------------------------

    def invoke(self, function: str, event: Any) -> Any:
        with warnings.catch_warnings():
            # Powertools warns when an invocation emitted no metric (a GET): not news here.
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            result = self.runtime.invoke(function, event)
        if not result.ok:
            raise RuntimeError(f"{function}: {result.error_type}: {result.error_message}")
        return result.payload

    def stream_pass(self) -> list[Any]:
        """Registry changes since the last look reach the reconciler (its stream mapping)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            return [r.payload for r in self.stream.deliver_to(self.runtime)]

    def task_event(
        self, arn: str, *, stop_code: str | None = None, exit_code: int | None = None
    ) -> dict[str, Any]:
        """The reconciler receives ECS's event for the task as it now stands."""
        events = TaskEvents(self.ecs, self.fleet.cluster, self.fleet.container, self.versions)
        event = events.current(arn, at=self.now(), stop_code=stop_code, exit_code=exit_code)
        return dict(self.invoke(self.fleet.reconciler, event))

    @property
    def ecs(self) -> Any:
        return self.account.session.client("ecs")

    def now(self) -> datetime:
        return datetime.now(UTC)

    def start_new_tasks(self) -> list[ObserverContainer]:
        """ECS starts the containers of tasks the reconciler ran: each claims its generation."""
        started = []
        for arn in self.ecs.list_tasks(cluster=self.fleet.cluster, desiredStatus="RUNNING")[
            "taskArns"
        ]:
            if arn in self.containers:
                continue
            task = describe_task(self.ecs, self.fleet.cluster, arn)
            environment = container_environment(self.ecs, task, self.fleet.container)
            container = ObserverContainer(
                arn,
                environment,
                self.account.session.client("dynamodb"),
                now=self.now,
                log=self._log(environment),
            )
            self.containers[arn] = container
            container.start()
            started.append(container)
        return sorted(started, key=lambda c: c.name)

    def _log(self, environment: dict[str, str]) -> IO[str]:
        if self.log_dir is None:
            stream: IO[str] = io.StringIO()
        else:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            name = environment.get("VIGIL_OBSERVER_NAME", "observer")
            generation = environment.get("VIGIL_OBSERVER_GENERATION", "0")
            path = self.log_dir / f"container-{name}-gen{generation}.log"
            stream = path.open("a", buffering=1)
        self.logs.append(stream)
        return stream

    def run_for(self, ticks: int) -> None:
        """Time passes, one ticker interval at a time; every live container runs meanwhile."""
        for _ in range(ticks):
            self.frozen.tick(TICK)
            for container in sorted(self.live(), key=lambda c: (c.name, c.generation)):
                container.step()

    def cluster_tasks(self) -> list[tuple[str, int]]:
        """(observer, generation) of every task the cluster ran, running or stopped."""
        arns = [
            arn
            for status in ("RUNNING", "STOPPED")
            for arn in self.ecs.list_tasks(cluster=self.fleet.cluster, desiredStatus=status)[
                "taskArns"
            ]
        ]
        marks = []
        for arn in arns:
            task = describe_task(self.ecs, self.fleet.cluster, arn)
            tags = {t["key"]: t["value"] for t in task.get("tags", [])}
            marks.append((tags["vigil:observer"], int(tags["vigil:generation"])))
        return marks

    def live(self) -> list[ObserverContainer]:
        return [c for c in self.containers.values() if c.alive]

    # -- reading back --------------------------------------------------------------------------------

    def registry(self) -> ObserverRegistry:
        return ObserverRegistry(self.account.session.client("dynamodb"), self.fleet.registry)

    def count(self, name: str) -> int | None:
        checkpoint = self.registry().get(name).checkpoint
        return int(checkpoint["count"]) if checkpoint and "count" in checkpoint else None

    def table_items(self, table: str) -> list[dict[str, Any]]:
        client = self.account.session.client("dynamodb")
        items = client.scan(TableName=table, ConsistentRead=True).get("Items", [])
        return sorted((from_wire(i) or {} for i in items), key=lambda i: json.dumps(i, default=str))


def simulate(
    account: LocalAccount,
    runtime: LocalLambda,
    frozen: Any,
    out: Callable[[str], None] = print,
    *,
    log_dir: Path | None = None,
) -> dict[str, Any]:
    """Play the observers' story on the deployed fleet, print it, and return what was read back.

    ``frozen`` is the freezegun clock the emulator session runs under (``tick`` moves it);
    ``log_dir`` receives the containers' logs (the functions' logs go where ``runtime`` sends them).
    """
    # moto advances a task's status on every DescribeTasks unless told not to (NOTES.md).
    state_manager.set_transition(
        model_name="ecs::task", transition={"progression": "manual", "times": 10**9}
    )
    fleet = DeployedFleet.of(account)
    story = Story(
        account=account,
        runtime=runtime,
        frozen=frozen,
        out=out,
        fleet=fleet,
        stream=StreamMappings.of(account.session, fleet.reconciler),
        log_dir=log_dir,
    )
    try:
        with _containers_stopped(story):
            out(
                "\n=== Observers ===\nThe deployed ObserverFleet: API function "
                f"{fleet.api_function},\n  reconciler {fleet.reconciler}, registry "
                f"{fleet.registry_table},\n  cluster {fleet.cluster.rsplit('/', 1)[-1]}"
            )
            _operator_creates(story)
            _reconciler_starts(story)
            _containers_run(story)
            _crash_and_restart(story)
            _operator_stops(story)
            _resync(story)
            _summary(story)
    finally:
        for stream in story.logs:
            stream.close()
        state_manager.unset_transition(model_name="ecs::task")
    return story.facts


@contextmanager
def _containers_stopped(story: Story) -> Iterator[None]:
    """No container thread outlives the demo: those still running end as a killed process would,
    writing nothing (the registry keeps what the story left)."""
    try:
        yield
    finally:
        for container in story.live():
            container.kill()


COLUMN = 52
"""Where the answers start in the story's lines."""


def _say(story: Story, what: str, answer: str) -> None:
    story.out(f"  {what:<{COLUMN}}{answer}")


def _operator_creates(story: Story) -> None:
    facts, registry, keys = story.facts, story.fleet.registry_table, story.fleet.idempotency_table
    story.out("\nAn operator runs the vigil CLI (its requests go to the deployed API function):")
    _, kinds, _ = story.vigil("observers", "kinds")
    facts["kinds"] = kinds.split()
    _say(story, "vigil observers kinds", ", ".join(facts["kinds"]))

    def create(name: str, key: str | None, kind: str = KIND) -> list[str]:
        config = json.dumps(WATCHES.get(name, {"symbol": "SOL-USD"}), separators=(",", ":"))
        argv = ["observers", "create", name, "--kind", kind, "--config", config]
        return argv + (["--idempotency-key", key] if key else [])

    created: dict[str, dict[str, Any]] = {}
    for name in WATCHES:
        created[name] = story.vigil_json(*create(name, f"create-{name}"))
        body = created[name]
        _say(
            story,
            f"vigil observers create {name} --kind {KIND} ...",
            f"created: {body['status']}, desired {body['desired']}, generation {body['generation']}",
        )
    facts["created"] = {name: body["status"] for name, body in created.items()}

    # A client that lost the answer retries with the same key: the first answer, nothing new.
    before = story.table_items(registry)
    again = story.vigil_json(*create("eth-watch", "create-eth-watch"))
    facts["replayed"] = again == created["eth-watch"]
    facts["replay_wrote_nothing"] = story.table_items(registry) == before
    _say(
        story,
        "  again, same Idempotency-Key",
        "the first answer replayed"
        + (", nothing written" if facts["replay_wrote_nothing"] else ", but the registry CHANGED"),
    )
    code, _, err = story.vigil(*create("eth-watch", None))
    facts["duplicate_without_key"] = {"exit_code": code, "error": err}
    _say(story, "  again, without a key", f"exit {code}: {err.removeprefix('error: ')}")

    # A bad request: refused with the reason, and nothing is written anywhere.
    registry_before, keys_before = story.table_items(registry), story.table_items(keys)
    code, _, err = story.vigil(*create("sol-watch", "create-sol-watch", kind="websocket"))
    registry_after, keys_after = story.table_items(registry), story.table_items(keys)
    unchanged = registry_after == registry_before and keys_after == keys_before
    facts["rejected"] = {
        "exit_code": code,
        "error": err,
        "http_status": 422 if "HTTP 422" in err else None,
        "nothing_written": unchanged,
        "sol_watch_exists": any(i.get("name") == "sol-watch" for i in registry_after),
    }
    _say(
        story,
        "vigil observers create sol-watch --kind websocket",
        f"exit {code}: {err.removeprefix('error: ')}",
    )
    _say(
        story,
        "",
        f"{'nothing written' if unchanged else 'WRITTEN'}: registry {len(registry_after)} items, "
        f"idempotency records {len(keys_after)}, as before",
    )


def _reconciler_starts(story: Story) -> None:
    story.frozen.tick(timedelta(seconds=1))
    passes = story.stream_pass()
    story.facts["first_pass"] = passes
    story.out(
        f"\nThe registry's stream reaches the reconciler ({len(passes)} batch, "
        f"{sum(p.get('observers', 0) for p in passes)} observers): RunTask on the cluster"
    )
    for observer in story.vigil_json("observers", "list"):
        _say(
            story,
            f"{observer['name']} generation {observer['generation']}",
            f"{observer['status']}, task {_task_id(observer['task_arn'])}",
        )
    tasks = story.ecs.list_tasks(cluster=story.fleet.cluster, desiredStatus="RUNNING")["taskArns"]
    story.facts["tasks_after_create"] = len(tasks)


def _containers_run(story: Story) -> None:
    story.out(
        "\nECS starts the containers: the observer runtime (in-process) with the task's "
        "environment,\nclaims its generation, heartbeats, and the ticker checkpoints a count"
    )
    for container in story.start_new_tasks():
        observer = story.registry().get(container.name)
        _say(
            story,
            f"{container.name} generation {container.generation} claims",
            f"{observer.status.value}, count {story.count(container.name)}",
        )
    story.run_for(3)
    for name in WATCHES:
        observer = story.registry().get(name)
        beat = f"{observer.heartbeat_at:%H:%M:%S}" if observer.heartbeat_at else "-"
        _say(
            story,
            f"{name} 30 s later",
            f"{observer.status.value}, count {story.count(name)}, heartbeat {beat}",
        )
    story.facts["counts_before_crash"] = {name: story.count(name) for name in WATCHES}


def _crash_and_restart(story: Story) -> None:
    facts, name = story.facts, "eth-watch"
    old = story.registry().get(name)
    assert old.task_arn is not None
    zombie = story.containers[old.task_arn]
    count_at_crash = story.count(name)
    story.frozen.tick(timedelta(seconds=5))
    story.ecs.stop_task(
        cluster=story.fleet.cluster, task=old.task_arn, reason="Essential container in task exited"
    )
    story.out(
        f"\n{name}'s task {_task_id(old.task_arn)} crashes: ECS stops it (EssentialContainerExited, "
        "exit code 1)"
    )
    answer = story.task_event(old.task_arn, stop_code="EssentialContainerExited", exit_code=1)
    new = story.registry().get(name)
    _say(
        story,
        "the ECS event reaches the reconciler",
        f"{', '.join(answer.get('actions', []))}: generation {new.generation}, "
        f"{new.status.value}, restarts {new.restarts}, task {_task_id(new.task_arn)}",
    )
    (replacement,) = story.start_new_tasks()
    resumed = story.count(name)
    _say(
        story,
        f"generation {replacement.generation} claims, resumes from the checkpoint",
        f"count {count_at_crash} -> {resumed}",
    )
    # Had generation 1's process survived (a partitioned host, say), it must not work on.
    story.run_for(3)
    code = int(zombie.exit_code) if zombie.exit_code is not None else None
    facts["fencing"] = {
        "generation": zombie.generation,
        "exit_code": code,
        "refused": zombie.refused,
        "alive": zombie.alive,
        "count_after": story.count(name),
    }
    _say(
        story,
        f"a surviving generation {zombie.generation} (a zombie) runs on",
        f"its next {zombie.refused} is refused (fenced): it stops, exit code {code}",
    )
    _say(story, f"{name} 30 s later", f"count {story.count(name)}, from generation 2 alone")
    facts["restart"] = {
        "old_generation": old.generation,
        "new_generation": new.generation,
        "restarts": new.restarts,
        "count_at_crash": count_at_crash,
        "resumed_count": resumed,
        "last_exit": new.last_exit.to_json() if new.last_exit else None,
    }


def _operator_stops(story: Story) -> None:
    name = "btc-watch"
    code, text, _ = story.vigil("observers", "stop", name)
    story.out("")
    _say(story, f"vigil observers stop {name}", f"exit {code}: {text.splitlines()[0]}")
    arn = story.registry().get(name).task_arn
    assert arn is not None
    story.frozen.tick(timedelta(seconds=1))
    story.stream_pass()
    task = describe_task(story.ecs, story.fleet.cluster, arn)
    _say(
        story,
        "the stream reaches the reconciler",
        f"StopTask: task {_task_id(arn)} {task['lastStatus']}",
    )
    exit_code = story.containers[arn].sigterm()
    _say(story, "ECS sends the container SIGTERM", f"it finishes its loop, exit code {exit_code}")
    answer = story.task_event(arn, stop_code="UserInitiated", exit_code=int(exit_code or 0))
    stopped = story.registry().get(name)
    _say(
        story,
        "the STOPPED event reaches the reconciler",
        f"{', '.join(answer.get('actions', []))}: {stopped.status.value}",
    )
    story.facts["stop"] = {
        "cli_exit_code": code,
        "container_exit_code": int(exit_code) if exit_code is not None else None,
        "task_status": task["lastStatus"],
        "status": stopped.status.value,
    }


def _resync(story: Story) -> None:
    story.run_for(3)
    event = scheduled_event(story.fleet.resync_rule, story.now())
    answer = story.invoke(story.fleet.reconciler, event)
    story.facts["resync"] = answer
    story.out("")
    _say(
        story,
        "the minute's resync (level-triggered)",
        f"{answer.get('observers')} observers, {answer.get('described')} tasks described",
    )


def _summary(story: Story) -> None:
    rows = []
    for observer in story.vigil_json("observers", "list"):
        arn = observer["task_arn"]
        task = describe_task(story.ecs, story.fleet.cluster, arn)["lastStatus"] if arn else "-"
        rows.append(
            {
                "name": observer["name"],
                "status": observer["status"],
                "desired": observer["desired"],
                "generation": observer["generation"],
                "restarts": observer["restarts"],
                "count": story.count(observer["name"]),
                "task": _task_id(arn),
                "task_status": task,
            }
        )
    story.out("\nObservers (vigil observers list; count: the checkpoint in the registry):")
    story.out(f"  {'name':<11}{'status':<9}{'generation':>11}{'restarts':>9}{'count':>7}  task")
    for row in rows:
        count = row["count"] if row["count"] is not None else "-"
        story.out(
            f"  {row['name']:<11}{row['status']:<9}{row['generation']:>11}{row['restarts']:>9}"
            f"{count:>7}  {row['task']} {row['task_status']}"
        )
    containers = sorted(story.containers.values(), key=lambda c: (c.name, c.generation))
    started = story.cluster_tasks()
    story.out(
        "Containers: "
        + ", ".join(
            f"{c.name} gen {c.generation} "
            + ("running" if c.alive else f"exit {int(c.exit_code or 0)}")
            for c in containers
        )
        + f".\nECS ran {len(started)} tasks: "
        + ("one per generation." if len(set(started)) == len(started) else "SOME TWICE.")
    )
    story.facts["observers"] = {row["name"]: row for row in rows}
    story.facts["containers"] = {
        f"{c.name}/{c.generation}": (None if c.alive else int(c.exit_code or 0)) for c in containers
    }
    story.facts["tasks_started"] = sorted(started)


def _task_id(arn: str | None) -> str:
    return arn.rsplit("/", 1)[-1][:8] if arn else "-"
