"""ECS's task metadata endpoint v4 as ``vigil local up`` serves it: shaped as AWS documents it."""

from __future__ import annotations

from vigil_tools.local.task_metadata import PREFIX, TaskMetadata

TASK = {
    "taskArn": "arn:aws:ecs:us-east-1:123456789012:task/vigil/0123abcd",
    "clusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/vigil",
    "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/VigilHost:3",
    "containers": [{"name": "observer"}],
    "launchType": "FARGATE",
}


def test_each_task_gets_its_own_path_answering_task_and_container() -> None:
    metadata = TaskMetadata("http://127.0.0.1:4580")

    url = metadata.register(TASK, "observer")

    assert url == f"http://127.0.0.1:4580{PREFIX}/0123abcd"
    task = metadata.answer(f"{PREFIX}/0123abcd/task")
    assert task is not None
    assert (task["TaskARN"], task["Cluster"]) == (TASK["taskArn"], TASK["clusterArn"])
    assert (task["Family"], task["Revision"], task["KnownStatus"]) == ("VigilHost", "3", "RUNNING")
    assert [c["Name"] for c in task["Containers"]] == ["observer"]
    container = metadata.answer(f"{PREFIX}/0123abcd")
    assert container is not None
    assert container["Labels"]["com.amazonaws.ecs.task-arn"] == TASK["taskArn"]


def test_an_unknown_or_stopped_task_is_not_found() -> None:
    metadata = TaskMetadata("http://127.0.0.1:4580")
    metadata.register(TASK, "observer")

    assert metadata.answer(f"{PREFIX}/0123abcd/stats-nope") is None
    metadata.forget(str(TASK["taskArn"]))
    assert metadata.answer(f"{PREFIX}/0123abcd/task") is None
    assert metadata.answer(f"{PREFIX}/other/task") is None
