"""A second adversarial pass over the tasks' promises (issue 15): each test is a way a promise
broke, reproduced on moto, with the fault injected where AWS would put it."""

from __future__ import annotations

import json

from tests.helpers.tasks import Stack, invoke, record_of
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_runs import Body
from vigil.contract.tasks import REASON_ATTRIBUTE


def test_a_deeply_nested_body_is_malformed_not_a_crash_of_the_batch(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A body of nested arrays (well inside SQS's 256 KiB) made ``json.loads`` raise
    RecursionError, which ``parse`` did not take for "not JSON": the record's handler raised,
    the message was kept and came back until SQS's redrive policy dropped it without a reason."""
    batch = [record_of("[" * 100_000, "m-deep"), record_of(json.dumps({"a": [[[1]]]}), "m-ok")]
    body = Body()

    assert invoke(make_handler(body), batch) == []
    assert body.runs == []
    reasons = [
        m["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"] for m in stack.dead_letters()
    ]
    assert len(reasons) == 2 and any("nested too deeply" in r for r in reasons)
