"""What ``GET /jobs`` reads, the jobs-control function may read, and no more: the declared jobs'
heads by key (BatchGetItem, under the jobs' key prefix), not the jobs index it no longer queries.
Reads the suite's one synthesized app (milliseconds)."""

from __future__ import annotations

import json

from tests.infra.test_jobs_control import _policies_of
from vigil_tools.emulator.template import Synthesized


def test_the_listing_reads_heads_by_key_under_the_jobs_prefix_only(
    synthesized: Synthesized,
) -> None:
    statements = _policies_of(synthesized, "JobsControl/Function")
    batch = [s for s in statements if "dynamodb:BatchGetItem" in s["Action"]]
    assert len(batch) == 1
    keys = batch[0]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert keys == ["JOB#*"]
    assert "/index/" not in json.dumps(batch[0]["Resource"])
    assert not any("/index/" in json.dumps(s["Resource"]) for s in statements)
