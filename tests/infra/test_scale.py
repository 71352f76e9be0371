"""Two hundred jobs, two hundred tasks and twenty observer kinds in one deploy (issue 29), in the
stage of the longest name: every deploy quota holds (``infra.quotas``, the check ``app.py``
runs), every job, task and kind is covered by the alarms and shown on a dashboard, each job and
task costs its shard at most 8 resources, and no job can write what another declares.

Cost: the two synths of ``benchmarks.scale_app`` (the module's fixture, once; see
docs/benchmarks.md for its time), then each test reads them in well under a second.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from benchmarks.scale_app import (
    Size,
    job_name,
    kind_name,
    synthesize_scale,
    task_name,
)
from infra.quotas import (
    CATALOG_PART,
    DASHBOARD_WIDGETS,
    ENVIRONMENT,
    INLINE_POLICIES,
    OUTPUTS,
    PARAMETERS,
    RESOURCES,
    TEMPLATE_BODY,
    Template,
    dashboard_widgets,
    environment_size,
    inline_policy_size,
    problems,
)
from tests.helpers.templates import actions, catalog_of
from vigil.contract.layout import Entity, function_name, shard_of
from vigil.contract.stages import max_stage_length

SIZE = Size()
STAGE = ("scale-" + "s" * 64)[: max_stage_length()]
"""The longest stage name there is: every name, ARN and URL derived from the stack's at its
longest (a default stage's are shorter; ``make bench``, section ``scale``, synthesizes both)."""


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return STAGE, synthesize_scale(tmp_path_factory.mktemp("scale"), SIZE, STAGE)


def by_name(templates: list[Template]) -> dict[str, Template]:
    return {t.name: t for t in templates}


def test_every_deploy_quota_holds(assembly: Any) -> None:
    stage, templates = assembly
    assert problems(templates) == []
    stack = f"Vigil-{stage}" if stage else "Vigil"
    assert templates[0].name == stack
    shards = [t for t in templates if t is not templates[0]]
    assert len(shards) == Entity.JOB.shards + Entity.TASK.shards
    worst: dict[str, int] = Counter()
    for template in templates:
        body = template.body
        worst["resources"] = max(worst["resources"], len(body["Resources"]))
        worst["outputs"] = max(worst["outputs"], len(body.get("Outputs", {})))
        worst["parameters"] = max(worst["parameters"], len(body.get("Parameters", {})))
        worst["template"] = max(worst["template"], template.size)
        for logical_id, resource in template.resources.items():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::Lambda::Function":
                size = environment_size(template, props.get("Environment", {}).get("Variables", {}))
                worst["environment"] = max(worst["environment"], size)
            elif resource["Type"] == "AWS::IAM::Role":
                worst["role"] = max(worst["role"], inline_policy_size(template, logical_id))
            elif resource["Type"] == "AWS::CloudWatch::Dashboard":
                worst["widgets"] = max(worst["widgets"], dashboard_widgets(template, props))
            elif resource["Type"] == "AWS::SSM::Parameter":
                worst["catalog part"] = max(worst["catalog part"], template.length(props["Value"]))
    assert worst["resources"] <= RESOURCES.limit
    assert worst["outputs"] <= OUTPUTS.limit and worst["parameters"] <= PARAMETERS.limit
    assert worst["template"] <= TEMPLATE_BODY.limit
    assert worst["environment"] <= ENVIRONMENT.limit
    assert worst["role"] <= INLINE_POLICIES.limit
    assert worst["widgets"] <= DASHBOARD_WIDGETS.limit
    assert worst["catalog part"] <= CATALOG_PART.limit


def test_each_job_and_task_costs_its_shard_at_most_8_resources(assembly: Any) -> None:
    _, templates = assembly
    per_entity = {}
    for template in templates[1:]:
        paths = [template.path_of(logical_id) for logical_id in template.resources]
        entities = {p.split("/")[2] for p in paths if re.match(r"^[^/]+/[^/]+/(Job|Task)\d+/", p)}
        own = [p for p in paths if p.split("/")[2] in entities]
        per_entity[template.name] = len(own) / len(entities)
    jobs = [v for k, v in per_entity.items() if "/Jobs" in k]
    tasks = [v for k, v in per_entity.items() if "/Tasks" in k]
    assert max(jobs) == 7 and max(tasks) == 8, per_entity


def test_every_job_task_and_kind_is_alarmed_and_on_a_dashboard(assembly: Any) -> None:
    stage, templates = assembly
    stack = templates[0]
    text = {t.name: json.dumps(t.body) for t in templates}
    for index in range(SIZE.jobs):
        name = job_name(index)
        shard = by_name(templates)[f"{stack.name}/Jobs{shard_of(Entity.JOB, name)}"]
        paths = [shard.path_of(i) for i in shard.resources]
        assert f"{shard.name}/Job{index:03d}/FailedRunsAlarm/Resource" in paths
        assert f'"title\\":\\"{name}: ticks that did not succeed' in text[shard.name]
    for index in range(SIZE.tasks):
        name = task_name(index)
        shard = by_name(templates)[f"{stack.name}/Tasks{shard_of(Entity.TASK, name)}"]
        paths = [shard.path_of(i) for i in shard.resources]
        assert f"{shard.name}/Task{index:03d}/QueueAlarm/Resource" in paths
        assert f'"title\\":\\"task {name}: outcomes' in text[shard.name]
    # The stack's alarms over every job (task): each grouped by the job, none filtered by one.
    queries = [
        q["Expression"]
        for r in stack.resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        for q in r["Properties"].get("Metrics", [])
        if str(q.get("Expression", "")).startswith("SELECT")
    ]
    for entity in ("job", "task"):
        grouped = [q for q in queries if q.endswith(f"GROUP BY {entity} ORDER BY SUM() DESC")]
        assert len(grouped) >= 4, entity
        for query in grouped:
            assert f"{entity} =" not in query, "no job left out"
            assert (f"stage = '{stage}'" in query) is bool(stage)
    for index in range(SIZE.kinds - SIZE.pooled):
        kind = kind_name(index, False)
        assert f"ObserverUncertainAlarm-{kind}" in text[stack.name]
        assert f"kind {kind}: CPU (units)" in text[stack.name]
    for index in range(SIZE.pooled):
        kind = kind_name(index, True)
        for alarm in ("HostLostAlarm", "HostsStuckStartingAlarm", "ObserverUncertainAlarm"):
            assert f"{alarm}-{kind}" in text[stack.name]


def test_no_job_may_write_what_another_declares(assembly: Any) -> None:
    """Least privilege at 200: each job's role names its own items, its own log streams, its own
    function and the table it declares (every fifth job), whatever shard it shares."""
    stage, templates = assembly
    prefix = f"Vigil-{stage}" if stage else "Vigil"
    for template in templates[1:]:
        if "/Jobs" not in template.name:
            continue
        for logical_id, resource in template.resources.items():
            path = template.path_of(logical_id)
            found = re.match(r"^[^/]+/[^/]+/Job(\d+)/FunctionRole/Resource$", path)
            if not found:
                continue
            index = int(found[1])
            statements = [
                s
                for policy in resource["Properties"]["Policies"]
                for s in policy["PolicyDocument"]["Statement"]
            ]
            rendered = json.dumps(statements)
            assert f'"JOB#{job_name(index)}"' in rendered
            assert rendered.count('"JOB#') == 1
            own = function_name(prefix, Entity.JOB, job_name(index))
            assert f"/{own}[*" in rendered
            assert rendered.count("log-stream:") == 1
            writes = [
                s
                for s in statements
                if sorted(actions(s))
                == ["dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
            ]
            assert len(writes) == (1 if index % 5 == 0 else 0), index


def test_the_catalogs_hold_every_job_and_task(assembly: Any) -> None:
    _, templates = assembly
    stack = templates[0]
    parameters = [r for r in stack.resources.values() if r["Type"] == "AWS::SSM::Parameter"]
    names = {entity: set(catalog_of(parameters, entity.plural)["entries"]) for entity in Entity}
    assert names[Entity.JOB] == {job_name(i) for i in range(SIZE.jobs)}
    assert names[Entity.TASK] == {task_name(i) for i in range(SIZE.tasks)}


def test_the_stacks_catalog_is_where_its_readers_look(assembly: Any) -> None:
    stage, templates = assembly
    stack = templates[0]
    paths = {
        r["Properties"]["Name"].rsplit("/", 1)[0]
        for r in stack.resources.values()
        if r["Type"] == "AWS::SSM::Parameter"
    }
    base = f"/vigil/Vigil-{stage}" if stage else "/vigil/Vigil"
    assert paths == {f"{base}/jobs", f"{base}/tasks", f"{base}/kinds"}
