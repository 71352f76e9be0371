"""The host's own calls (heartbeats, exit reports), which never hold up its loop.

A host must fence its children one fence grace before its lease ends and kill them at its end,
whatever the network does. botocore's settings alone cannot promise that: a read timeout bounds
each socket read, not the answer (a peer that trickles bytes keeps a call going), a DNS lookup has
no timeout at all, and the client setting ``max_attempts`` counts retries, not attempts (2 means
three tries). So the supervisor never waits for a call: it starts one, looks at it at each step,
and once the call's deadline has passed it stops waiting (the call then counts as unanswered, as a
timeout does: it may still land, which every host write tolerates)::

    step: beat due -> start ...... step: done? -> lease renewed from when the beat was sent
                        \\-- thread: persist(UpdateItem) --/
    step: past its deadline, not done -> given up; the lease runs out -> fence -> kill

:class:`ThreadCalls` runs each call on a thread of its own (the host's entry point), and wakes the
loop when one ends. :class:`InlineCalls` runs it at once, before ``start`` returns: only right
where time stands still while a call runs (tests stepping the supervisor, the emulator).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from vigil.clock import Sleeper

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Call(Protocol[T_co]):
    """One call started by the supervisor."""

    def done(self) -> bool: ...

    def result(self) -> T_co:
        """Its answer, or raises what it raised (only once :meth:`done`)."""
        ...


class Calls(Protocol):
    def start(self, work: Callable[[], T]) -> Call[T]: ...


class Outcome(Generic[T]):
    """What a call ended with (an answer or an exception), once it has ended."""

    def __init__(self) -> None:
        self._answer: T | None = None
        self._error: BaseException | None = None
        self._ended = threading.Event()

    def run(self, work: Callable[[], T]) -> None:
        try:
            self._answer = work()
        except Exception as error:  # handed to whoever reads the result
            self._error = error
        finally:
            self._ended.set()

    def done(self) -> bool:
        return self._ended.is_set()

    def result(self) -> T:
        if not self._ended.is_set():
            raise RuntimeError("the call has not ended")
        if self._error is not None:
            raise self._error
        return self._answer  # type: ignore[return-value]


class InlineCalls:
    """Runs each call before :meth:`start` returns."""

    def start(self, work: Callable[[], T]) -> Call[T]:
        outcome: Outcome[T] = Outcome()
        outcome.run(work)
        return outcome


class ThreadCalls:
    """Runs each call on a daemon thread of its own; ``on_done`` is called (from that thread) as
    each ends, so the loop wakes for it. A call given up on keeps its thread until botocore's
    own timeouts end it; it can never keep the host from exiting."""

    def __init__(self, on_done: Callable[[], None] = lambda: None) -> None:
        self._on_done = on_done

    def start(self, work: Callable[[], T]) -> Call[T]:
        outcome: Outcome[T] = Outcome()

        def body() -> None:
            outcome.run(work)
            self._on_done()

        threading.Thread(target=body, name="host-call", daemon=True).start()
        return outcome


class Budget:
    """Time left for a call's retries, counting both the clock and the pauses taken: a test's or
    the emulator's clock does not move while :func:`~vigil.persist.persist` pauses, so the pauses
    alone must be able to use the budget up."""

    def __init__(self, seconds: float, monotonic: Callable[[], float], sleep: Sleeper) -> None:
        self._seconds, self._monotonic, self._sleep = seconds, monotonic, sleep
        self._start = monotonic()
        self._slept = 0.0

    def left(self) -> float:
        return self._seconds - max(self._monotonic() - self._start, self._slept)

    def sleep(self, seconds: float) -> None:
        self._slept += seconds
        self._sleep(seconds)
