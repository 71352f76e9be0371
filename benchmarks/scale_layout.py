"""Issue 29 measured: the resources each job, task and kind costs, before (main's one-stack
template as the upgrade tests keep it, ``tests/upgrade/name_keyed``) and after (the 200 jobs,
200 tasks and 20 kinds of ``benchmarks.scale_app`` in their shards); CloudWatch's monthly price
of each layout's alarms and dashboards at that size; and what the synth costs.

Counted, not estimated: an entity's resources are those under its construct (and, before, the
alarms and scheduler roles that name it and no other entity); a shard's shared resources are
those under none of its entities.
"""

from __future__ import annotations

import gzip
import json
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.idle_cost import ALARM_METRIC_MONTH, DASHBOARD_MONTH
from benchmarks.scale_app import Size, synthesize_scale
from infra.quotas import Template
from tests.helpers.monitoring import alarm_series

BEFORE = Path(__file__).resolve().parent.parent / "tests/upgrade/name_keyed/Vigil.template.json.gz"
"""main's template at db5f9af (every job and task in the one stack), frozen for the upgrade
tests: what a deploy of today's layout upgrades from."""
EXAMPLE = {"Cleanup": "cleanup", "DailyReport": "daily-report"}
EXAMPLE_TASKS = {"SendReceipt": "send-receipt", "ProvisionTenant": "provision-tenant"}
TARGET = 8
"""Issue 29's target: at most 8 resources per job (task) in the stack that holds it."""


def _mentions(resource: Mapping[str, Any], construct: str, name: str) -> bool:
    path = resource.get("Metadata", {}).get("aws:cdk:path", "")
    text = json.dumps(resource.get("Properties", {}))
    return f"/{construct}/" in path or construct in text or f'"{name}"' in text


def before_counts() -> dict[str, Counter[str]]:
    """Per example job and task of the one-stack template: its resources by type."""
    resources = json.loads(gzip.decompress(BEFORE.read_bytes()))["Resources"]
    entities = EXAMPLE | EXAMPLE_TASKS
    counts: dict[str, Counter[str]] = {}
    for construct, name in entities.items():
        others = [(c, n) for c, n in entities.items() if c != construct]
        own = {
            logical_id
            for logical_id, r in resources.items()
            if _mentions(r, construct, name) and not any(_mentions(r, c, n) for c, n in others)
        }
        # A role is the entity's when the policies naming it are (the scheduler's per target).
        own |= {
            role["Ref"]
            for logical_id in list(own)
            if resources[logical_id]["Type"] == "AWS::IAM::Policy"
            for role in resources[logical_id]["Properties"].get("Roles", [])
            if isinstance(role, dict) and "Ref" in role
        }
        counts[construct] = Counter(resources[logical_id]["Type"] for logical_id in own)
    return counts


def after_counts(templates: list[Template]) -> tuple[dict[str, list[Counter[str]]], Counter[str]]:
    """Per entity (``Job``, ``Task``) each one's resources by type in its shard; and what the
    shards share, all shards together."""
    per: dict[str, list[Counter[str]]] = {"Job": [], "Task": []}
    shared: Counter[str] = Counter()
    for template in templates[1:]:
        owned: dict[str, Counter[str]] = {}
        for logical_id, found in template.resources.items():
            parts = template.path_of(logical_id).split("/")
            entity = parts[2] if len(parts) > 3 else ""
            if entity.rstrip("0123456789") in per:
                owned.setdefault(entity, Counter())[found["Type"]] += 1
            else:
                shared[found["Type"]] += 1
        for entity, counts in owned.items():
            per[entity.rstrip("0123456789")].append(counts)
    return per, shared


def kinds_after(templates: list[Template], size: Size) -> Counter[str]:
    """What the 20 kinds cost the parent stack, by type: resources whose construct names a kind."""
    from benchmarks.scale_app import kind_name

    kinds = [kind_name(i, False) for i in range(size.kinds - size.pooled)]
    kinds += [kind_name(i, True) for i in range(size.pooled)]
    found: Counter[str] = Counter()
    for logical_id, r in templates[0].resources.items():
        path = templates[0].path_of(logical_id)
        if any(kind in path or kind.title().replace("-", "") in path for kind in kinds):
            found[r["Type"]] += 1
    return found


def monitoring(templates: Iterable[Template]) -> tuple[int, int, int, int]:
    """Alarms, the standard metrics they read (what CloudWatch bills), Metrics Insights alarms
    and dashboards."""
    alarms = metrics = insights = dashboards = 0
    for template in templates:
        for r in template.resources.values():
            if r["Type"] == "AWS::CloudWatch::Alarm":
                alarms += 1
                metrics += len(alarm_series(r))
                queries = r["Properties"].get("Metrics", [])
                insights += any(
                    "Expression" in q and "SELECT" in str(q["Expression"]) for q in queries
                )
            elif r["Type"] == "AWS::CloudWatch::Dashboard":
                dashboards += 1
    return alarms, metrics, insights, dashboards


def deploy_on_emulator(outdir: str) -> tuple[float, float, int]:
    """The assembly deployed on a fresh in-process emulator (moto's CloudFormation, nested stacks
    from their asset templates, then what moto skips): wall seconds, the process's peak RSS in MB
    after it, and the resources CloudFormation created in the stack and its shards."""
    import boto3
    from moto import mock_aws

    from vigil_tools.emulator.account import REGION, deploy_account
    from vigil_tools.emulator.template import load

    default_session = boto3.DEFAULT_SESSION
    with mock_aws():
        boto3.setup_default_session(
            region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
        )
        try:
            started = time.perf_counter()
            account = deploy_account(load(Path(outdir)), boto3.DEFAULT_SESSION)
            wall = time.perf_counter() - started
            created = account.deployed.resource_count
        finally:
            boto3.DEFAULT_SESSION = default_session
    return wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, created


def _typed(counts: Counter[str]) -> str:
    return ", ".join(f"{t.split('::', 1)[1]} {n}" for t, n in sorted(counts.items()))


def run(size: Size | None = None, *, deploy: bool = True) -> str:
    size = size or Size()
    with tempfile.TemporaryDirectory() as out:
        wall, cpu = time.perf_counter(), time.process_time()
        templates = synthesize_scale(out, size)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        deployed = deploy_on_emulator(out) if deploy else None
    before = before_counts()
    per, shared = after_counts(templates)
    lines = [
        f"{size.jobs} jobs, {size.tasks} tasks, {size.kinds} kinds ({size.pooled} pooled), the "
        f"default stage: {len(templates)} templates (the stack and {len(templates) - 1} shards); "
        f"the synth and its quota check took {wall:.0f} s wall, {cpu:.0f} s CPU, peak RSS "
        f"{peak_mb:.0f} MB (the CDK's node process not counted).",
        *(
            [
                f"Deployed on the emulator (in-process moto, `vigil_tools.emulator`): "
                f"{deployed[2]} resources created by moto's CloudFormation (the types it skips, "
                "schedules and alarms among them, then by the emulator) in "
                f"{deployed[0]:.0f} s wall, the process's peak RSS "
                f"{deployed[1]:.0f} MB after it."
            ]
            if deployed
            else []
        ),
        "",
        "| | resources each | by type |",
        "|---|---:|---|",
    ]
    for construct, counts in before.items():
        kind = "job" if construct in EXAMPLE else "task"
        lines.append(f"| before: a {kind} ({construct}) | {counts.total()} | {_typed(counts)} |")
    for entity, found in per.items():
        most = max(found, key=Counter.total)
        least = min(found, key=Counter.total)
        lines.append(
            f"| after: a {entity.lower()} in its shard ({len(found)}) | "
            f"{least.total()}-{most.total()} (target <= {TARGET}) | {_typed(most)} |"
        )
    shards = len(templates) - 1
    lines.append(
        f"| after: shared by the {shards} shards | {shared.total()} "
        f"({shared.total() / shards:.1f} a shard) | {_typed(shared)} |"
    )
    kinds = kinds_after(templates, size)
    lines.append(
        f"| after: the {size.kinds} kinds, in the stack | {kinds.total()} "
        f"({kinds.total() / size.kinds:.1f} a kind) | {_typed(kinds)} |"
    )
    lines.append(
        "| after: the stack | "
        f"{len(templates[0].resources)} | the largest shard: "
        f"{max(len(t.resources) for t in templates[1:])} |"
    )
    old_alarm_metrics = sum(
        len(alarm_series(r))
        for r in json.loads(gzip.decompress(BEFORE.read_bytes()))["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and any(name in json.dumps(r["Properties"]) for name in ("cleanup", "send-receipt"))
    )
    alarms, metrics, insights, dashboards = monitoring(templates)
    entities = size.jobs + size.tasks
    before_alarms = old_alarm_metrics / 2 * entities * ALARM_METRIC_MONTH
    after_alarms = metrics * ALARM_METRIC_MONTH
    lines += [
        "",
        f"CloudWatch at {size.jobs} jobs and {size.tasks} tasks, a month (alarms "
        f"${ALARM_METRIC_MONTH:.2f} per standard metric read, dashboards ${DASHBOARD_MONTH:.2f}):",
        "",
        "| | before (one stack) | after (shards) |",
        "|---|---:|---:|",
        f"| alarms | {old_alarm_metrics / 2:.0f} metrics a job or task x {entities}: "
        f"${before_alarms:,.2f} | {alarms} alarms, {metrics} standard metrics: "
        f"${after_alarms:,.2f} |",
        f"| Metrics Insights alarms | none | {insights}: $0.10 per series a query analyses, and "
        "the per-job and per-task series exist only while something fails (see the design) |",
        f"| dashboards | 1: ${DASHBOARD_MONTH:.2f} | {dashboards}: "
        f"${dashboards * DASHBOARD_MONTH:,.2f} (first 3 of an account free) |",
        f"| per job-month and task-month | ${(before_alarms + DASHBOARD_MONTH) / entities:.2f} | "
        f"${(after_alarms + dashboards * DASHBOARD_MONTH) / entities:.2f} (target <= $0.50) |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
