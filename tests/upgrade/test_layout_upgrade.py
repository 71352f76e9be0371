"""Upgrading a deployed stack from the one-stack layout to the shards loses nothing (issue 29).

main's app as it was before the shards (db5f9af, ``tests/helpers/upgrade.py``: every job's and
task's resources in the one stack) is deployed on the emulator and work is put in flight: a tick
recorded, a job's dead letter, a queued task, a task's one-time schedule, a running observer.
This checkout's app is deployed over it as that version's upgrade deploys it (``-c
legacyRegistry=true``: the registry's migration, ``test_registry_upgrade.py``), the old queues
retained, and ``vigil upgrade drain`` hands on what they hold (run again with ``--delete``, it
removes them once empty). Then every piece of work is where it belongs and runs.

Cost: ~15 s (two deploys on the emulator, 18 simulated minutes; the app's synth is the suite's
shared ``migrating`` one).
"""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import boto3
from moto import mock_aws

from tests.helpers.upgrade import name_keyed_app
from vigil_tools.cli import main
from vigil_tools.emulator.template import Synthesized
from vigil_tools.testing.stack import VigilStack
from vigil_tools.upgrade import drain, old_logical_id


def test_the_old_layouts_queue_names_are_found_by_the_cdks_rule(tmp_path: Path) -> None:
    template = name_keyed_app(tmp_path).template
    queues = {k for k, r in template["Resources"].items() if r["Type"] == "AWS::SQS::Queue"}
    for construct, role in (
        ("Cleanup", "FailedRuns"),
        ("DailyReport", "Undelivered"),
        ("SendReceipt", "Queue"),
        ("ProvisionTenant", "DeadLetters"),
    ):
        assert old_logical_id(construct, role) in queues


def test_an_upgrade_to_the_shards_loses_no_tick_task_dead_letter_or_observer(
    old_stack: VigilStack, migrating: Synthesized
) -> None:
    kit = old_stack
    assert not kit.account.synth.nested, "main's layout: everything in the one stack"
    # Work in flight on the old layout
    (run,) = kit.fire("cleanup")
    assert run.ok
    function = kit.catalog.job("cleanup")["function"]
    with _quiet():
        kit.runtime.invoke_async(function, {"detail": "not a tick"})
    assert len(kit.dead_letters("cleanup")) == 1
    payload = {"order": "o-1", "email": "a@example.com", "total": 5}
    later = kit.enqueue(
        "send-receipt", {**payload, "order": "o-2"}, key="o-2", delay=timedelta(minutes=16)
    )
    kit.create_observer("w1", "ticker")
    kit.advance(minutes=2)
    before = kit.observer("w1")
    assert before.status == "RUNNING"
    # Enqueued as the deploy starts: on the old queue, which the old function no longer polls.
    queued = kit.enqueue("send-receipt", payload, key="o-1", deliver=False)
    assert kit.task("send-receipt", queued).status.value == "QUEUED"

    kit.redeploy(migrating)
    upgraded = kit
    assert upgraded.account.synth.nested, "the shards"
    drained = drain(upgraded.account.session, "Vigil")

    moved = {q.old.rsplit("/", 1)[-1].split("-")[1]: q.moved for q in drained.queues}
    assert moved[old_logical_id("Cleanup", "FailedRuns")] == 1
    assert moved[old_logical_id("SendReceipt", "Queue")] == 1
    assert all(q.left == 0 for q in drained.queues)
    assert len(drained.schedules) == 1, "the one-time schedule now sends to the new queue"
    # Nothing lost: the tick's record, the dead letter (now in the job's new queue), the queued
    # task (run by the new function from the new queue), the scheduled one, the observer.
    assert [t.status for t in upgraded.history("cleanup")][-1] == "SUCCEEDED"
    assert len(upgraded.dead_letters("cleanup")) == 1
    upgraded.advance(minutes=1)
    assert upgraded.task("send-receipt", queued).status.value == "SUCCEEDED"
    upgraded.advance(minutes=16)
    assert upgraded.task("send-receipt", later).status.value == "SUCCEEDED"
    after = upgraded.observer("w1")  # copied to the registry keyed by kind, handed over
    assert after.status == "RUNNING" and after.generation >= before.generation
    # Run again (the CLI), it finds nothing more to move; with --delete, the emptied old queues go.
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["upgrade", "drain", "--delete"], session=upgraded.account.session, stdout=out, stderr=err
    )
    assert (code, err.getvalue()) == (0, "")
    rows = out.getvalue().splitlines()[1:-1]
    assert len(rows) == len(drained.queues) and all(
        r.split()[2:] == ["0", "0", "True"] for r in rows
    )
    assert drain(upgraded.account.session, "Vigil").queues == []


def test_a_drain_before_the_new_version_is_deployed_says_so() -> None:
    with mock_aws():
        session = boto3.Session(
            region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local"
        )
        out, err = io.StringIO(), io.StringIO()
        code = main(
            ["--stage", "blue", "upgrade", "drain"], session=session, stdout=out, stderr=err
        )
    assert code == 1
    assert "stack 'Vigil-blue' has no jobs or tasks catalog" in err.getvalue()
    assert "deploy this version over it first" in err.getvalue()


class _quiet:
    """The malformed event's expected error, kept off the test's output."""

    def __enter__(self) -> None:
        import logging

        self._level = logging.getLogger().level
        logging.getLogger().setLevel(logging.CRITICAL)

    def __exit__(self, *exc: object) -> None:
        import logging

        logging.getLogger().setLevel(self._level)
