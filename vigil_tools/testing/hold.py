"""A run held after its claim: how a test makes a run outlive its lease.

``vigil_stack.fire(job, hold=True)`` delivers the tick on a thread of its own and stops that
thread right after its claim was written (the first transaction it made that DynamoDB applied),
before the job's body starts. The test then moves time past the lease, delivers the tick again
(the redelivery takes it over, attempt 2, a higher fencing token), and releases the held run: its
body runs late, with its old token, and its outcome is refused (``FENCED``)::

    test:  fire(hold=True) ─ advance(past the lease) ─ fire() ──────────── release()
    held:  claim ║ parked ........................................║ body ─ finish: FENCED
    copy:                                           claim ─ body ─ finish: SUCCEEDED (attempt 2)

While the run is parked, the process is given back as it was before the delivery (environment
variables, standard output), so what the test does meanwhile runs in no other function's
environment; the held run gets its own back when released.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.client import BaseClient

from vigil_tools.emulator.lambda_runtime import AsyncInvocation

PARK_DEADLINE_SECONDS = 300.0
"""A delivery that neither parks nor ends by then is stuck."""


class _Changes:
    """What the held invocation changed for the whole process (environment variables, standard
    output): taken out while it is parked, put back when it goes on."""

    def __init__(self, environ_before: dict[str, str], stdout_before: Any) -> None:
        now = dict(os.environ)
        self._set = {k: v for k, v in now.items() if environ_before.get(k) != v}
        self._unset = [k for k in environ_before if k not in now]
        self._before = {k: environ_before.get(k) for k in [*self._set, *self._unset]}
        self._stdout, self._stdout_before = sys.stdout, stdout_before

    def take_out(self) -> None:
        for key, value in self._before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.stdout = self._stdout_before

    def put_back(self) -> None:
        os.environ.update(self._set)
        for key in self._unset:
            os.environ.pop(key, None)
        sys.stdout = self._stdout


class Parked:
    """One delivery run on its own thread, stopped after its first applied transaction."""

    def __init__(self, deliver: Callable[[], AsyncInvocation]) -> None:
        self._deliver = deliver
        self._stopped = threading.Event()
        self._go = threading.Event()
        self._parked = False
        self.result: AsyncInvocation | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="held-run", daemon=True)
        self._changes: _Changes | None = None

    def start(self) -> bool:
        """Deliver; True once the run is parked after its claim, False if it ended first."""
        environ, stdout = dict(os.environ), sys.stdout
        with _parking_requests(self):
            self._thread.start()
            if not self._stopped.wait(PARK_DEADLINE_SECONDS):
                raise RuntimeError(f"the held delivery did not stop in {PARK_DEADLINE_SECONDS} s")
        if self._parked:
            self._changes = _Changes(environ, stdout)
            self._changes.take_out()
        return self._parked

    @property
    def parked(self) -> bool:
        return self._parked and not self._go.is_set()

    def release(self) -> AsyncInvocation:
        """Let the run go on (in its own environment again); its delivery's result."""
        if self._changes is not None:
            self._changes.put_back()
            self._changes = None
        self._go.set()
        self._thread.join(PARK_DEADLINE_SECONDS)
        if self._thread.is_alive():
            raise RuntimeError(f"the held run did not end in {PARK_DEADLINE_SECONDS} s")
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def _run(self) -> None:
        try:
            self.result = self._deliver()
        except BaseException as error:  # handed to the test's thread at release
            self.error = error
        finally:
            self._stopped.set()

    def _after_request(self, operation: str) -> None:
        if threading.current_thread() is not self._thread or self._parked:
            return
        if operation == "TransactWriteItems":
            self._parked = True
            self._stopped.set()
            self._go.wait()


@contextmanager
def _parking_requests(parked: Parked) -> Iterator[None]:
    """Until the run parks (or ends): each request it makes is applied, then may park it."""
    made = BaseClient._make_api_call

    def request(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        answer = made(client, operation, params)
        parked._after_request(operation)
        return answer

    BaseClient._make_api_call = request  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseClient._make_api_call = made  # type: ignore[method-assign]
