"""FAILED notices on the observers' dead-letter queue, for a person or an alarm to pick up."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from vigil.clock import iso
from vigil.observers import decisions as d


class Notices:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def failed(self, record: d.Record, action: d.MarkFailed, now: datetime) -> None:
        observer = record.observer
        body = {
            "type": "ObserverFailed",
            "name": observer.name,
            "kind": observer.kind,
            "generation": observer.generation,
            "reason": action.reason,
            "consecutive_failures": action.consecutive_failures,
            "last_exit": action.last_exit.to_json() if action.last_exit else None,
            "at": iso(now),
        }
        self._client.send_message(QueueUrl=self._queue_url, MessageBody=json.dumps(body))
