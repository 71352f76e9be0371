"""Deliveries that overlap, the same way every run: threads that take turns at each AWS request.

EventBridge Scheduler may deliver one tick more than once at the same moment, and the copies'
requests to DynamoDB then interleave: that is where a guard's races live. Here each copy runs on a
thread of its own, but only one thread moves at a time, and it hands over after each request it
made to the emulator::

    copy 1: request 1 |         |         | request 2 |         | ...
    copy 2:           | request 1 |       |           | request 2 |
    copy 3:           |         | request 1 |         |           |

Each request is applied whole (AWS applies each atomically; moto is not thread-safe, NOTES.md),
the copies interleave at every request boundary, and the order is the same on every run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from botocore.client import BaseClient

T = TypeVar("T")
DEADLINE_SECONDS = 300.0
"""A copy that has not finished by then is stuck (waiting on something another copy holds)."""


class CopiesStuck(RuntimeError):
    """The copies stopped taking turns: one waits on something only a waiting copy can give."""


class Turns:
    """Run ``bodies`` at once, one request at a time each, in turn (see the module docstring)."""

    def __init__(self) -> None:
        self._moved = threading.Condition()
        self._live: list[threading.Thread] = []
        self._current: threading.Thread | None = None

    def run(self, bodies: Sequence[Callable[[], T]]) -> list[T]:
        results: list[Any] = [None] * len(bodies)
        errors: list[BaseException] = []

        def copy(index: int) -> None:
            self._wait_turn()
            try:
                results[index] = bodies[index]()
            except BaseException as error:  # handed to the caller's thread
                errors.append(error)
            finally:
                self._leave()

        threads = [
            threading.Thread(target=copy, args=(i,), name=f"copy-{i + 1}", daemon=True)
            for i in range(len(bodies))
        ]
        self._live, self._current = list(threads), threads[0] if threads else None
        made = BaseClient._make_api_call
        turns = self

        def request(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
            if threading.current_thread() not in turns._live:
                return made(client, operation, params)
            try:
                return made(client, operation, params)
            finally:
                turns._hand_over()

        BaseClient._make_api_call = request  # type: ignore[method-assign]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(DEADLINE_SECONDS)
                if thread.is_alive():
                    raise CopiesStuck(f"{thread.name} did not finish in {DEADLINE_SECONDS:g} s")
        finally:
            BaseClient._make_api_call = made  # type: ignore[method-assign]
        if errors:
            raise errors[0]
        return results

    def _wait_turn(self) -> None:
        me = threading.current_thread()
        with self._moved:
            self._moved.wait_for(lambda: self._current is me)

    def _hand_over(self) -> None:
        """The next live copy moves; this one waits for its turn to come round again."""
        me = threading.current_thread()
        with self._moved:
            self._current = self._after(me)
            self._moved.notify_all()
            self._moved.wait_for(lambda: self._current is me)

    def _leave(self) -> None:
        me = threading.current_thread()
        with self._moved:
            following = self._after(me)
            self._live.remove(me)
            self._current = following if following is not me else None
            self._moved.notify_all()

    def _after(self, thread: threading.Thread) -> threading.Thread:
        return self._live[(self._live.index(thread) + 1) % len(self._live)]
