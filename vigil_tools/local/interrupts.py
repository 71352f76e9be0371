"""Ctrl-C, SIGTERM and SIGHUP as ``vigil local up`` takes them: stop at once, but never mid-bookkeeping.

The handler sets the stop event every wait uses, and raises :class:`Stopped` to unwind the main
thread (a deploy in progress ends there). A signal is handled between any two bytecodes, so where
an exception must not land (a process spawned but not yet recorded, which nothing would stop
then), :meth:`Interrupts.held` defers it to the end of the block.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Stopped(BaseException):
    """Ctrl-C, SIGTERM or SIGHUP: ``vigil local up`` stops everything it started.

    A BaseException, as KeyboardInterrupt is: landing inside a library that catches Exception (a
    botocore request wraps it in HTTPClientError, logging swallows it) it still unwinds to the top.
    """


class Interrupts:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self._held = 0
        self._deferred = False

    def on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.stop.set()
        if self._held:
            self._deferred = True
            return
        raise Stopped()

    @contextmanager
    def held(self) -> Iterator[None]:
        """A block a signal cannot interrupt: it is raised when the block ends."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if not self._held and self._deferred:
                self._deferred = False
                raise Stopped()
