"""Upgrading a deployed stack from the one-stack layout to the shards loses nothing (issue 29).

``Vigil.template.json`` here is main's synthesized app as it was before the shards (commit
db5f9af: every job's and task's resources in the one stack). It is deployed on the emulator, work
is put in flight (a tick recorded, a job's dead letter, a queued task, a task's one-time schedule, a
running observer), the app of this checkout is deployed over it (``VigilStack.upgrade``: the update
CloudFormation makes, the old queues retained), and ``vigil upgrade drain`` hands on what the old
queues hold (and, run again with ``--delete``, removes them once empty). Then every piece of work is where it belongs and runs.

Cost: two deploys on the emulator (the new app's synth is the suite's shared one): ~25 s of CPU.
"""

from __future__ import annotations

import io
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from freezegun import freeze_time
from moto import mock_aws
from moto.moto_api import state_manager

from vigil_tools.cli import main
from vigil_tools.emulator.account import deploy_account
from vigil_tools.emulator.template import Synthesized, load
from vigil_tools.project import find_project
from vigil_tools.testing.stack import VigilStack
from vigil_tools.upgrade import drain, old_logical_id

BEFORE = Path(__file__).parent
START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)


def before_the_shards(folder: Path) -> Synthesized:
    """main's cloud assembly: its template and asset manifest, each file asset this checkout's
    ``functions/`` (the emulator runs the handlers of the checkout anyway)."""
    for name in ("Vigil.template.json", "Vigil.assets.json"):
        shutil.copy(BEFORE / name, folder / name)
    assets = json.loads((folder / "Vigil.assets.json").read_text())
    for asset in assets["files"].values():
        source = folder / asset["source"]["path"]
        if asset["source"].get("packaging") == "zip" and not source.exists():
            source.symlink_to(find_project().functions, target_is_directory=True)
    return load(folder, "Vigil")


@pytest.fixture
def old_stack(tmp_path: Path) -> Any:
    synth = before_the_shards(tmp_path)
    with mock_aws(), freeze_time(START) as frozen:
        state_manager.set_transition(
            model_name="ecs::task", transition={"progression": "manual", "times": 10**9}
        )
        session = boto3.Session(
            region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local"
        )
        boto3.setup_default_session(
            region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local"
        )
        account = deploy_account(synth, session)
        stack = VigilStack(account, now=lambda: datetime.now(UTC), move_to=frozen.move_to)
        try:
            yield stack
        finally:
            stack.close()
            stack.fleet.kill_all()
            state_manager.unset_transition(model_name="ecs::task")


def test_the_old_layouts_queue_names_are_found_by_the_cdks_rule() -> None:
    template = json.loads((BEFORE / "Vigil.template.json").read_text())
    queues = {k for k, r in template["Resources"].items() if r["Type"] == "AWS::SQS::Queue"}
    for construct, role in (
        ("Cleanup", "FailedRuns"),
        ("DailyReport", "Undelivered"),
        ("SendReceipt", "Queue"),
        ("ProvisionTenant", "DeadLetters"),
    ):
        assert old_logical_id(construct, role) in queues


def test_an_upgrade_to_the_shards_loses_no_tick_task_dead_letter_or_observer(
    old_stack: VigilStack, synthesized: Synthesized
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
        "send-receipt", {**payload, "order": "o-2"}, key="o-2", delay=timedelta(minutes=40)
    )
    kit.create_observer("w1", "ticker")
    kit.advance(minutes=2)
    before = kit.observer("w1")
    assert before.status == "RUNNING"
    # Enqueued as the deploy starts: on the old queue, which the old function no longer polls.
    queued = kit.enqueue("send-receipt", payload, key="o-1", deliver=False)
    assert kit.task("send-receipt", queued).status.value == "QUEUED"

    upgraded = kit.upgrade(synthesized)
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
    upgraded.advance(minutes=40)
    assert upgraded.task("send-receipt", later).status.value == "SUCCEEDED"
    after = upgraded.observer("w1")
    assert (after.status, after.generation) == ("RUNNING", before.generation)
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
