"""The pooled part of ``make demo``: a pooled kind's observers packed on hosts, a host killed and
its observers resumed elsewhere, a zombie host fenced.

It drives the deployed fleet as ``vigil_stack`` does (:class:`~vigil_tools.testing.stack.VigilStack`:
the API function, the registry's stream, the reconciler's minute resync, ECS's events), and every
host task runs the real host process (:class:`~vigil_tools.emulator.hosts.EmulatedHost`: the
host's supervisor, heartbeat store and exit reports, its children the unchanged observer runtime),
all on the simulated clock. Everything printed is read back through ``vigil hosts list`` and
``vigil observers list``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vigil.catalog import STACK_ENV, read_catalog
from vigil.contract.layout import CATALOG_DIGEST_ENV, Catalogued, catalog_path
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.fleet import DeployedFleet
from vigil_tools.testing.stack import VigilStack

KIND = "pooled-ticker"
CONFIG = {"interval_seconds": 30}
FIRST = [f"feed-{i:02d}" for i in range(1, 7)]
SECOND = [f"feed-{i:02d}" for i in range(7, 11)]
STEP = timedelta(seconds=5)
FAILOVER_LIMIT = timedelta(minutes=3)
COLUMN = 52
ROLLOUT = True
"""Whether the story ends with a rollout to a new revision (the manager's pooled rollout)."""
ROLLOUT_LIMIT = timedelta(minutes=10)


class Pooled:
    """The stack, the story's output and the facts it collects."""

    def __init__(self, stack: VigilStack, out: Callable[[str], None], heartbeat: int) -> None:
        self.stack = stack
        self.out = out
        self.heartbeat = heartbeat
        self.facts: dict[str, Any] = {}
        self.names: dict[str, str] = {}
        """Host id -> its label in the story (host A, B, ...)."""

    def say(self, what: str, answer: str) -> None:
        self.out(f"  {what:<{COLUMN}}{answer}")

    def label(self, host_id: str | None) -> str:
        if host_id is None:
            return "-"
        if host_id not in self.names:
            self.names[host_id] = f"host {chr(ord('A') + len(self.names))}"
        return self.names[host_id]

    def hosts(self) -> list[dict[str, Any]]:
        """The kind's hosts, each new one labelled in the order the story first sees it."""
        listed = self.stack.hosts(KIND)
        for host in sorted(listed, key=lambda h: (-h["used"], h["id"])):
            self.label(host["id"])
        return sorted(listed, key=lambda h: self.label(h["id"]))

    def advance(self, seconds: float) -> None:
        self.stack.advance(seconds=seconds)
        self.hosts()

    def observers(self) -> dict[str, dict[str, Any]]:
        return {o["name"]: o for o in self.stack.observers() if o["kind"] == KIND}

    def count(self, name: str) -> int | None:
        state = self.stack.observer(name).checkpoint
        return int(state["count"]) if state and "count" in state else None

    def table(self, title: str) -> list[dict[str, Any]]:
        rows = self.hosts()
        self.out(f"\n{title} (vigil hosts list --kind {KIND}):")
        self.out(
            f"  {'host':<8}{'status':<10}{'rev':>4}{'used':>6}{'free':>6}{'heartbeat':>11}"
            "  observers (generation)"
        )
        for host in rows:
            age = host["heartbeat_age_seconds"]
            beat = f"{age:.0f} s ago" if age is not None else "-"
            members = " ".join(f"{n}:{g}" for n, g in sorted(host["observers"].items()))
            self.out(
                f"  {self.label(host['id']):<8}{host['status']:<10}{host['revision'] or '-':>4}"
                f"{host['used']:>6}{host['free']:>6}{beat:>11}  {members or '-'}"
            )
        return rows


def simulate(
    account: LocalAccount,
    now: Callable[[], datetime],
    move_to: Callable[[datetime], object],
    out: Callable[[str], None] = print,
    *,
    heartbeat_seconds: int = 30,
    log_dir: Path | None = None,
    rollout: bool = ROLLOUT,
) -> dict[str, Any]:
    """Play the pooled story on the deployed fleet, print it, and return what was read back.

    ``log_dir`` receives the functions' logs and one log per host task (its children's lines
    carry their observer and generation)."""
    stack = VigilStack(account, now=now, move_to=move_to, log_dir=log_dir)
    story = Pooled(stack, out, heartbeat_seconds)
    try:
        out(
            f"\n=== Pooled observers ===\nKind {KIND}: up to 10 observers per host task, 5 free "
            f"slots kept as headroom; one heartbeat per host every {heartbeat_seconds} s"
        )
        _packed(story)
        _failover(story)
        _zombie(story)
        if rollout:
            _rollout(story)
        _summary(story)
    finally:
        stack.fleet.kill_all()
        if log_dir is not None:
            for arn, host in stack.fleet.hosts.items():
                path = log_dir / f"host-{host.host_id}.log"
                path.write_text(stack.fleet.logs[arn].getvalue())
    return story.facts


def _packed(story: Pooled) -> None:
    stack = story.stack
    for name in FIRST:
        stack.create_observer(name, KIND, CONFIG)
    story.hosts()
    story.out(
        f"\nvigil observers create {FIRST[0]} .. {FIRST[-1]} --kind {KIND}: the reconciler "
        "places them on a host\n(its task started with RunTask), the host's next heartbeat "
        "tells it what to run; the minute's\nresync starts a second host to keep the headroom"
    )
    story.advance(70)
    for name in SECOND:
        stack.create_observer(name, KIND, CONFIG)
    story.out(
        f"vigil observers create {SECOND[0]} .. {SECOND[-1]}: placed on the least-loaded host"
    )
    story.advance(40)
    rows = story.table("Hosts and their observers")
    observers = story.observers()
    story.facts["packed"] = {
        "hosts": {story.label(h["id"]): sorted(h["observers"]) for h in rows},
        "running": sorted(n for n, o in observers.items() if o["status"] == "RUNNING"),
        "tasks": len({o["task_arn"] for o in observers.values()}),
    }
    story.say(
        f"{len(observers)} observers",
        f"{len(story.facts['packed']['running'])} RUNNING on "
        f"{story.facts['packed']['tasks']} Fargate tasks",
    )


def _failover(story: Pooled) -> None:
    stack = story.stack
    victim = min(
        (h for h in story.hosts() if h["observers"]),
        key=lambda h: (h["used"], story.label(h["id"])),
    )
    moved = dict(victim["observers"])
    counts = {name: story.count(name) for name in moved}
    killed_at = stack.now()
    story.out(
        f"\n{story.label(victim['id'])}'s task is killed (ECS: STOPPED, exit 1) with "
        f"{len(moved)} observers on it"
    )
    stack.fleet.crash(victim["task_arn"])
    stack.fleet.settle()
    placed = story.observers()
    story.say(
        "the STOPPED event reaches the reconciler",
        f"{story.label(victim['id'])} "
        f"{next(h['status'] for h in stack.hosts(KIND) if h['id'] == victim['id'])}; its "
        f"observers placed on {', '.join(sorted({story.label(placed[n]['host']) for n in moved}))}"
        " at generation + 1",
    )
    elapsed = None
    while stack.now() - killed_at < FAILOVER_LIMIT:
        story.advance(STEP.total_seconds())
        current = story.observers()
        if all(
            current[n]["status"] == "RUNNING" and current[n]["generation"] > g
            for n, g in moved.items()
        ):
            elapsed = (stack.now() - killed_at).total_seconds()
            break
    after = story.observers()
    resumed = {name: story.count(name) for name in moved}
    intervals = f"{elapsed / story.heartbeat:.1f}" if elapsed is not None else "-"
    story.say(
        "every moved observer RUNNING again",
        f"{elapsed:.0f} s after the STOPPED event = {intervals} heartbeat intervals"
        if elapsed is not None
        else "NOT within 3 minutes",
    )
    for name in sorted(moved):
        story.say(
            f"  {name} gen {moved[name]} -> gen {after[name]['generation']} "
            f"on {story.label(after[name]['host'])}",
            f"resumed from its checkpoint: count {counts[name]} -> {resumed[name]}",
        )
    story.facts["failover"] = {
        "host": story.label(victim["id"]),
        "seconds": elapsed,
        "heartbeat_intervals": None if elapsed is None else elapsed / story.heartbeat,
        "observers": {
            name: {
                "generation": (moved[name], after[name]["generation"]),
                "host": (story.label(victim["id"]), story.label(after[name]["host"])),
                "status": after[name]["status"],
                "count": (counts[name], resumed[name]),
            }
            for name in sorted(moved)
        },
    }


def _zombie(story: Pooled) -> None:
    stack = story.stack
    story.advance(60)  # the resync starts a host for the headroom the failover used
    victim = max(
        (h for h in story.hosts() if h["observers"]),
        key=lambda h: (h["used"], story.label(h["id"])),
    )
    arn = victim["task_arn"]
    host = stack.fleet.hosts[arn]
    names = dict(victim["observers"])
    counts = {name: story.count(name) for name in names}
    children = {n: c for n, c in host.children.items()}
    story.out(
        f"\n{story.label(victim['id'])} is cut off: ECS reports its task STOPPED, but the process "
        f"runs on with its {len(names)} observers (a zombie)"
    )
    stack.fleet.lose_contact(arn)
    stack.fleet.settle()
    status = next(h["status"] for h in stack.hosts(KIND) if h["id"] == victim["id"])
    placed = story.observers()
    story.say(
        "the STOPPED event reaches the reconciler",
        f"{story.label(victim['id'])} {status}; its observers placed on "
        f"{', '.join(sorted({story.label(placed[n]['host']) for n in names}))} at generation + 1",
    )
    began = stack.now()
    while host.alive and stack.now() - began < FAILOVER_LIMIT:
        story.advance(STEP.total_seconds())
    fenced_after = (stack.now() - began).total_seconds()
    story.say(
        "the zombie's next heartbeat is refused",
        f"{fenced_after:.0f} s later: it fences every child, exit code "
        f"{int(host.exit_code) if host.exit_code is not None else '-'}",
    )
    story.say("  why it was refused", str(host.fenced).rpartition("replaced: ")[2])
    exits = {n: c.exit_code for n, c in children.items()}
    codes = sorted({"-" if c is None else str(int(c)) for c in exits.values()})
    story.say(
        f"  its {len(exits)} children (generations {_span(names.values())})",
        f"fenced (SIGUSR1): exit code {', '.join(codes)}, nothing more written",
    )
    story.advance(60)
    after = story.observers()
    story.facts["zombie"] = {
        "host": story.label(victim["id"]),
        "status": status,
        "exit_code": None if host.exit_code is None else int(host.exit_code),
        "fenced": host.fenced,
        "fenced_after_seconds": fenced_after,
        "children_exit_codes": {n: None if c is None else int(c) for n, c in exits.items()},
        "observers": {
            n: {
                "generation": (names[n], after[n]["generation"]),
                "host": (story.label(victim["id"]), story.label(after[n]["host"])),
                "placed_generation": placed[n]["generation"],
                "status": after[n]["status"],
                "count": (counts[n], story.count(n)),
            }
            for n in sorted(names)
        },
    }


def _summary(story: Pooled) -> None:
    rows = story.table("Hosts and their observers at the end")
    observers = story.observers()
    story.out("\nPooled observers (vigil observers list; count: the checkpoint in the registry):")
    story.out(f"  {'name':<10}{'status':<9}{'generation':>11}{'count':>7}  host")
    for name, observer in sorted(observers.items()):
        count = story.count(name)
        story.out(
            f"  {name:<10}{observer['status']:<9}{observer['generation']:>11}"
            f"{count if count is not None else '-':>7}  {story.label(observer['host'])}"
        )
    story.facts["hosts"] = {
        story.label(h["id"]): {
            "status": h["status"],
            "revision": h["revision"],
            "observers": h["observers"],
        }
        for h in rows
    }
    story.facts["observers"] = {
        name: {
            "status": o["status"],
            "generation": o["generation"],
            "host": story.label(o["host"]),
            "count": story.count(name),
        }
        for name, o in observers.items()
    }


def _span(generations: Any) -> str:
    values = sorted(set(generations))
    return ", ".join(str(v) for v in values)


def deploy_new_revision(account: LocalAccount, kind: str) -> str:
    """What a deploy that changes ``kind``'s image does: a new revision of its task definition, in
    the kinds catalog the reconciler reads, and its revision in the reconciler's environment (a
    new function configuration)."""
    ecs, functions = account.session.client("ecs"), account.session.client("lambda")
    ssm = account.session.client("ssm")
    reconciler = DeployedFleet.of(account).reconciler
    variables = functions.get_function_configuration(FunctionName=reconciler)["Environment"][
        "Variables"
    ]
    stack = variables[STACK_ENV]
    parts = read_catalog(ssm, stack, Catalogued.KINDS)
    current_arn = parts.entries[kind]["task_definition"]
    current = ecs.describe_task_definition(taskDefinition=current_arn)["taskDefinition"]
    registered = ecs.register_task_definition(
        **{key: current[key] for key in _REGISTERED if key in current}
    )["taskDefinition"]["taskDefinitionArn"]
    path = catalog_path(stack, Catalogued.KINDS)
    for parameter in ssm.get_parameters_by_path(Path=path)["Parameters"]:
        entries = json.loads(parameter["Value"])
        if kind in entries:
            entries[kind]["task_definition"] = registered
            ssm.put_parameter(
                Name=parameter["Name"], Value=json.dumps(entries), Type="String", Overwrite=True
            )
    digest = f"{variables[CATALOG_DIGEST_ENV]},{registered.rsplit(':', 1)[-1]}"
    functions.update_function_configuration(
        FunctionName=reconciler,
        Environment={"Variables": {**variables, CATALOG_DIGEST_ENV: digest}},
    )
    return str(registered)


_REGISTERED = (
    "family",
    "taskRoleArn",
    "executionRoleArn",
    "networkMode",
    "containerDefinitions",
    "requiresCompatibilities",
    "cpu",
    "memory",
    "runtimePlatform",
)


def _rollout(story: Pooled) -> None:
    stack = story.stack
    arn = deploy_new_revision(stack.account, KIND)
    revision = int(arn.rsplit(":", 1)[1])
    before = {n: o["generation"] for n, o in story.observers().items()}
    counts = {n: story.count(n) for n in before}
    story.out(
        f"\nA deploy registers revision {revision} of the kind's task definition and gives the "
        "reconciler\nits new VIGIL_TASK_DEFINITIONS: the resync rolls every observer over, "
        "hand-overs a few at a time"
    )
    began = stack.now()
    done = None
    while stack.now() - began < ROLLOUT_LIMIT:
        story.advance(STEP.total_seconds() * 6)
        hosts = {h["id"]: h for h in stack.hosts(KIND)}
        observers = story.observers()
        if all(
            o["status"] == "RUNNING" and hosts[o["host"]]["revision"] == revision
            for o in observers.values()
        ):
            done = (stack.now() - began).total_seconds()
            break
    story.say(
        f"every observer on revision {revision}",
        f"{done:.0f} s after the deploy" if done is not None else "NOT within 10 minutes",
    )
    retired = None
    while done is not None and stack.now() - began < ROLLOUT_LIMIT:
        if all(
            h["status"] in {"STOPPED", "LOST"}
            for h in stack.hosts(KIND)
            if h["revision"] != revision
        ):
            retired = (stack.now() - began).total_seconds()
            break
        story.advance(STEP.total_seconds() * 6)
    story.say(
        f"every revision-{revision - 1} host drained and stopped",
        f"{retired:.0f} s after the deploy" if retired is not None else "NOT within 10 minutes",
    )
    after = story.observers()
    hosts = {h["id"]: h for h in stack.hosts(KIND)}
    story.facts["rollout"] = {
        "revision": revision,
        "seconds": done,
        "retired_seconds": retired,
        "observers": {
            n: {
                "generation": (before[n], o["generation"]),
                "revision": hosts[o["host"]]["revision"] if o["host"] in hosts else None,
                "status": o["status"],
                "count": (counts[n], story.count(n)),
            }
            for n, o in sorted(after.items())
        },
    }
