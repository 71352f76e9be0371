# ruff: noqa: F811 (the flows' fixtures, imported, are the tests' parameters)
"""Defects the flows chaos soak found (``benchmarks/flows_soak.py``), each reproduced on its own:
a compensation whose invocation died inside it ran again on the next execution (the issue asks
for each compensation once), and a flow whose attempts kept crashing ended FAILED without
compensating its finished steps. Driven by a queue played on the test's clock (``FlowQueue``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.helpers.tasks import PLAIN, Stack
from tests.tasks.test_flows import (  # noqa: F401 (the flows' fixtures)
    Crash,
    client,
    flow_handler,
    journal,
    queue,
)
from vigil.contract.tasks import TaskStatus
from vigil.tasks import TaskRun
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.flows.errors import Abort
from vigil_tools.testing.flow_queue import FlowQueue


def through_crashes(stack: Stack, queue: FlowQueue, handler: Any, rounds: int = 10) -> int:
    """Deliver until nothing is due, each crash's message back after its visibility: crashes."""
    for crashes in range(rounds):
        try:
            queue.run(handler, until=stack.clock() + timedelta(hours=1))
            return crashes
        except Crash:
            stack.clock.advance(timedelta(minutes=16))
    raise AssertionError(f"still crashing after {rounds} rounds")


def test_a_compensation_whose_invocation_died_inside_it_is_not_run_again(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    refunds: list[int] = []

    def refund(result: Any) -> None:
        refunds.append(result)
        if len(refunds) == 1:
            raise Crash()  # the refund may or may not have reached the bank

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("charge", lambda: 5, compensate=refund)
        raise Abort("no stock")

    client.enqueue(PLAIN, {}, key="c-1")
    assert through_crashes(stack, queue, flow_handler(body)) == 1

    assert refunds == [5]
    record = client.get(PLAIN, "c-1")
    assert (record.status, record.error_type) == (TaskStatus.FAILED, "CompensationFailed")
    assert "'charge'" in str(record.error_message) and "died" in str(record.error_message)
    assert journal(stack, "c-1")["charge"]["compensation"] == "STARTED"


def test_a_flow_whose_attempts_kept_crashing_compensates_its_finished_steps(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    undone: list[str] = []
    ships: list[int] = []

    def ship() -> Any:
        ships.append(1)
        raise Crash()  # out of memory, every time

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", lambda: "r", compensate=lambda r: undone.append(f"release {r}"))
        run.step("charge", lambda: "c", compensate=lambda r: undone.append(f"refund {r}"))
        run.step("ship", ship)

    client.enqueue(PLAIN, {}, key="c-2")
    through_crashes(stack, queue, flow_handler(body))

    record = client.get(PLAIN, "c-2")
    assert (record.status, record.error_type) == (TaskStatus.COMPENSATED, "RunCrashed")
    assert undone == ["refund c", "release r"]
    assert len(ships) == 3  # the first try and 2 retries: the crashed-out replay runs no step
