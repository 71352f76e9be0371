"""ECS's task metadata endpoint v4, emulated for the container processes of ``vigil local up``.

ECS gives every container ``ECS_CONTAINER_METADATA_URI_V4``; a pooled host reads its own task ARN
(its fence) from ``$ECS_CONTAINER_METADATA_URI_V4/task``. Each task gets a path of its own on the
local endpoint (``/ecs-metadata/v4/<task id>``): the path itself answers the container's metadata,
``/task`` the task's, both shaped as AWS documents them (the fields ECS's describe-tasks knows).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

PREFIX = "/ecs-metadata/v4"
"""Where the documents are served on the local endpoint."""
ENV = "ECS_CONTAINER_METADATA_URI_V4"


def documents(task: Mapping[str, Any], container: str) -> dict[str, Any]:
    """The task's ``task`` and ``container`` documents from its describe-tasks entry."""
    family, _, revision = str(task["taskDefinitionArn"]).rsplit("/", 1)[-1].partition(":")
    cluster = str(task["clusterArn"])
    arn = str(task["taskArn"])

    def container_document(name: str) -> dict[str, Any]:
        return {
            "Name": name,
            "DockerName": f"ecs-{family}-{revision}-{name}",
            "Labels": {
                "com.amazonaws.ecs.cluster": cluster,
                "com.amazonaws.ecs.container-name": name,
                "com.amazonaws.ecs.task-arn": arn,
                "com.amazonaws.ecs.task-definition-family": family,
                "com.amazonaws.ecs.task-definition-version": revision,
            },
            "DesiredStatus": "RUNNING",
            "KnownStatus": "RUNNING",
            "Type": "NORMAL",
        }

    names = [str(c["name"]) for c in task.get("containers") or [] if c.get("name")] or [container]
    task_document = {
        "Cluster": cluster,
        "TaskARN": arn,
        "Family": family,
        "Revision": revision,
        "DesiredStatus": "RUNNING",
        "KnownStatus": "RUNNING",
        "LaunchType": task.get("launchType", "FARGATE"),
        "Containers": [container_document(name) for name in names],
    }
    if task.get("availabilityZone"):
        task_document["AvailabilityZone"] = task["availabilityZone"]
    return {"task": task_document, "container": container_document(container)}


class TaskMetadata:
    """The documents of the running tasks, by task id; read by the endpoint's threads."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/") + PREFIX
        self._documents: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def register(self, task: Mapping[str, Any], container: str) -> str:
        """The task's ``ECS_CONTAINER_METADATA_URI_V4``, serving its documents from now on."""
        task_id = str(task["taskArn"]).rsplit("/", 1)[-1]
        with self._lock:
            self._documents[task_id] = documents(task, container)
        return f"{self.base_url}/{task_id}"

    def forget(self, task_arn: str) -> None:
        with self._lock:
            self._documents.pop(task_arn.rsplit("/", 1)[-1], None)

    def answer(self, path: str) -> dict[str, Any] | None:
        """``/ecs-metadata/v4/<id>`` or ``.../<id>/task``: the document, or None (404)."""
        parts = path[len(PREFIX) :].strip("/").split("/")
        with self._lock:
            found = self._documents.get(parts[0])
        if found is None or len(parts) > 2 or (len(parts) == 2 and parts[1] != "task"):
            return None
        return dict(found["task" if len(parts) == 2 else "container"])
