"""The testing kit itself: failures in the author's code show the author's traceback, crashes are
restarted, names the app does not have are refused with the ones it has, and a template moto
cannot deploy fails with the resource and moto's reason."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Logger
from botocore.client import BaseClient
from moto import mock_aws

from tests.helpers.kinds import ticker_runs
from vigil_tools.emulator.deploy import DeployFailed, deploy
from vigil_tools.emulator.template import Synthesized
from vigil_tools.testing import UnknownName, VigilStack


class DiskFull(RuntimeError):
    pass


def _the_authors_helper() -> None:
    raise DiskFull("no space left on /scratch")


def _fail_where_the_author_logs(monkeypatch: pytest.MonkeyPatch, message: str) -> None:
    """The author's code raises where it logs ``message`` (the runtime's own logging goes on)."""
    original = Logger.info

    def info(self: Logger, msg: object, *args: Any, **kwargs: Any) -> None:
        if msg == message:
            _the_authors_helper()
        original(self, msg, *args, **kwargs)

    monkeypatch.setattr(Logger, "info", info)


@pytest.fixture
def cleanup_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cleanup job's own code raises (where it logs "cleaning up"), the guard does not."""
    _fail_where_the_author_logs(monkeypatch, "cleaning up")


def test_a_failing_job_shows_in_history_with_the_authors_traceback(
    vigil_stack: VigilStack, cleanup_fails: None
) -> None:
    t = vigil_stack.now() + timedelta(minutes=5)

    vigil_stack.fire("cleanup", at=t)

    (tick,) = vigil_stack.history("cleanup")
    # cleanup has no Lambda retries (retry_attempts=0 in app.py): one attempt, then the queue
    assert (tick.status, tick.attempts, tick.error_type) == ("FAILED", 1, "DiskFull")
    assert tick.traceback is not None
    frames = tick.traceback.splitlines()
    assert frames[0] == "Traceback (most recent call last):"
    assert "functions/jobs/cleanup.py" in frames[1]  # the author's handler comes first
    assert "_the_authors_helper" in tick.traceback
    assert "vigil_tools" not in tick.traceback and "lambda_runtime" not in tick.traceback
    assert frames[-1] == "tests.testing_kit.test_kit.DiskFull: no space left on /scratch"
    (letter,) = vigil_stack.dead_letters("cleanup")
    assert (letter.scheduled_at, letter.error_type) == (t, "DiskFull")


def test_reraise_raises_the_authors_exception_from_the_authors_frame(
    vigil_stack: VigilStack, cleanup_fails: None
) -> None:
    vigil_stack.fire("cleanup", at=vigil_stack.now() + timedelta(minutes=5))

    with pytest.raises(DiskFull) as raised:
        vigil_stack.reraise("cleanup")

    shown = [str(entry.path) for entry in raised.traceback.filter(raised)]
    # the test's own line, then the author's handler, then what it called (info, the helper):
    # no frame of the kit, the emulator, the guard or Powertools in between
    assert shown[0] == __file__
    assert shown[1].endswith("functions/jobs/cleanup.py")
    assert shown[2:] == [__file__, __file__]


def test_a_redrive_after_the_fix_runs_the_tick(
    vigil_stack: VigilStack, monkeypatch: pytest.MonkeyPatch, cleanup_fails: None
) -> None:
    vigil_stack.fire("cleanup", at=vigil_stack.now() + timedelta(minutes=5))
    monkeypatch.undo()  # the author fixes the bug

    vigil_stack.redrive("cleanup")

    assert [(r.status, r.attempts) for r in vigil_stack.history("cleanup")] == [("SUCCEEDED", 2)]
    assert vigil_stack.dead_letters("cleanup") == []


def test_dead_letters_lists_every_failed_tick_not_just_ten(
    vigil_stack: VigilStack, cleanup_fails: None
) -> None:
    # 12 ticks delivered a few seconds late (within cleanup's 2 minutes), not 12 five-minute
    # steps ahead: the clock stands still, so no hour of the app's other schedules runs meanwhile.
    for late in range(12):
        vigil_stack.fire("cleanup", at=vigil_stack.now() - timedelta(seconds=5 * late))
    assert len(vigil_stack.history("cleanup")) == 12  # 12 FAILED ticks, retry_attempts=0

    assert len(vigil_stack.dead_letters("cleanup")) == 12
    assert len(vigil_stack.dead_letters("cleanup")) == 12  # reading consumed nothing


def test_a_fire_ahead_then_advance_does_not_deliver_a_late_backlog(
    vigil_stack: VigilStack,
) -> None:
    vigil_stack.fire("cleanup", at=vigil_stack.now() + timedelta(minutes=20))  # 06:20
    vigil_stack.advance(minutes=5)  # to 06:25

    # As on AWS the schedule fired 06:05, 06:10, 06:15 on time while time passed, not late (MISSED)
    statuses = [r.status for r in vigil_stack.history("cleanup")]
    assert "MISSED" not in statuses, statuses
    assert [
        (r.scheduled_at.strftime("%H:%M"), r.attempts) for r in vigil_stack.history("cleanup")
    ] == [("06:25", 1), ("06:20", 1), ("06:15", 1), ("06:10", 1), ("06:05", 1)]


def test_a_naive_at_is_refused_with_a_clear_error(vigil_stack: VigilStack) -> None:
    naive = vigil_stack.now().replace(tzinfo=None) + timedelta(minutes=5)

    with pytest.raises(ValueError, match="timezone-aware"):
        vigil_stack.fire("cleanup", at=naive)

    assert vigil_stack.history("cleanup") == []  # nothing delivered


def test_a_crashed_observer_is_restarted_by_the_reconciler(vigil_stack: VigilStack) -> None:
    vigil_stack.create_observer("eth-watch", "ticker", {"interval_seconds": 5})
    vigil_stack.advance(seconds=10)

    vigil_stack.crash("eth-watch")
    vigil_stack.advance(seconds=10)

    observer = vigil_stack.observer("eth-watch")
    assert (observer.status, observer.generation, observer.restarts) == ("RUNNING", 2, 1)


def test_crashing_one_pooled_observer_does_not_restart_its_neighbours(
    vigil_stack: VigilStack,
) -> None:
    vigil_stack.create_observer("p1", "pooled-ticker", {"interval_seconds": 5})
    vigil_stack.create_observer("p2", "pooled-ticker", {"interval_seconds": 5})
    vigil_stack.advance(seconds=30)

    vigil_stack.crash("p1")  # its process dies (exit 1), as a child of its host
    vigil_stack.advance(seconds=30)

    p1, p2 = vigil_stack.observer("p1"), vigil_stack.observer("p2")
    assert (p1.status, p1.restarts) == ("RUNNING", 1)
    assert p1.last_exit is not None and p1.last_exit["exit_code"] == 1
    assert (p2.generation, p2.restarts) == (1, 0)  # its host and its neighbour ran on


def test_a_kind_that_keeps_crashing_fails_with_its_traceback_in_the_logs(
    vigil_stack: VigilStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_where_the_author_logs(monkeypatch, "tick")  # the ticker's run(ctx) raises

    vigil_stack.create_observer("eth-watch", "ticker", {"interval_seconds": 5})
    # 5 crashes, 30 + 60 + 120 s of backoff between the restarts: FAILED in the 4th minute (each
    # minute is a resync step of the app, the test's cost: 6, not 30)
    vigil_stack.advance(minutes=6)

    observer = vigil_stack.observer("eth-watch")
    assert observer.status == "FAILED"
    assert observer.last_exit is not None and observer.last_exit["exit_code"] == 1
    logs = vigil_stack.observer_logs("eth-watch")
    assert "no space left on /scratch" in logs and "_the_authors_helper" in logs


def test_names_the_app_does_not_have_are_refused_with_the_ones_it_has(
    vigil_stack: VigilStack,
) -> None:
    with pytest.raises(
        UnknownName, match=r"no job 'clean-up' in this app; jobs: cleanup, daily-report"
    ):
        vigil_stack.fire("clean-up")
    with pytest.raises(UnknownName, match=r"no job 'nope'.*jobs: cleanup, daily-report"):
        vigil_stack.history("nope")
    with pytest.raises(
        UnknownName, match=r"no kind 'websocket' in this app; kinds: pooled-ticker, ticker"
    ):
        vigil_stack.create_observer("sol-watch", "websocket", {})
    vigil_stack.create_observer("btc-watch", "ticker")
    with pytest.raises(
        UnknownName, match=r"no observer 'eth-watch' in this app; observers: btc-watch"
    ):
        vigil_stack.crash("eth-watch")


def test_each_test_starts_empty_at_the_same_time(vigil_stack: VigilStack) -> None:
    from vigil_tools.testing.plugin import START

    assert vigil_stack.now() == START
    assert vigil_stack.history("cleanup") == []
    with pytest.raises(UnknownName):
        vigil_stack.observer("btc-watch")


def test_boto3s_default_session_is_given_back_when_a_test_ends(
    _vigil_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even where moto is configured not to give it back itself (a team's moto config)."""
    from moto.core.config import default_user_config

    from vigil_tools.testing.plugin import deployed_stack

    monkeypatch.setitem(default_user_config["core"], "reset_boto3_session", False)
    before = boto3.DEFAULT_SESSION
    with deployed_stack(_vigil_session) as stack:
        assert boto3.DEFAULT_SESSION is stack.account.session  # the functions' clients use it

    assert boto3.DEFAULT_SESSION is before


COUNTING_KIND = """
STARTS = 0  # module state: a new container (a new process) starts it at 0 again


def run(ctx):
    global STARTS
    STARTS += 1
    ctx.checkpoint({"starts_in_this_process": STARTS})
    while not ctx.stopping:
        ctx.sleep(5)
"""


@pytest.fixture
def counting_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The deployed kind ``ticker`` runs ``counting_kind.run``: a kind with a module-level counter."""
    with ticker_runs("counting_kind", COUNTING_KIND, tmp_path, monkeypatch):
        yield


def test_each_generation_imports_the_kind_anew_as_a_new_container_does(
    vigil_stack: VigilStack, counting_kind: None
) -> None:
    vigil_stack.create_observer("eth-watch", "ticker")
    assert vigil_stack.observer("eth-watch").checkpoint == {"starts_in_this_process": 1}

    vigil_stack.crash("eth-watch")

    observer = vigil_stack.observer("eth-watch")
    assert (observer.generation, observer.checkpoint) == (2, {"starts_in_this_process": 1})


def test_the_teams_modules_are_imported_anew_for_each_test(_vigil_session: Any) -> None:
    from vigil_tools.testing.plugin import deployed_stack

    with deployed_stack(_vigil_session) as first:
        first.fire("cleanup")
        helper = sys.modules["jobs"]  # the team's package every job imports
        helper.cache = "left by the first test"  # type: ignore[attr-defined]  # module state

    with deployed_stack(_vigil_session) as second:
        second.fire("cleanup")
        assert sys.modules["jobs"] is not helper
        assert not hasattr(sys.modules["jobs"], "cache")


def test_copies_of_a_delivery_run_at_once_and_the_guard_runs_the_tick_once(
    vigil_stack: VigilStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[str] = []  # the thread of each request the emulator applied, in order
    applied = BaseClient._make_api_call

    def record(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        requests.append(threading.current_thread().name)
        return applied(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", record)
    t = vigil_stack.now() + timedelta(minutes=5)

    delivered = vigil_stack.fire("cleanup", at=t, copies=3)

    answers = [d.attempts[-1].payload for d in delivered]
    assert sorted(a["outcome"] for a in answers) == ["DUPLICATE", "DUPLICATE", "SUCCEEDED"]
    # the duplicates were refused while the tick was running: they overlapped its run
    (winner,) = [a for a in answers if a["outcome"] == "SUCCEEDED"]
    assert {a["reason"] for a in answers if a is not winner} == {
        f"tick is running under token {winner['fencing_token']}"
    }
    assert [(r.status, r.attempts) for r in vigil_stack.history("cleanup")] == [("SUCCEEDED", 1)]
    # the emulator saw the copies' requests interleaved, not one copy's after another's
    copies = [name for name in requests if name.startswith("copy-")]
    runs = [name for i, name in enumerate(copies) if i == 0 or copies[i - 1] != name]
    assert len(set(copies)) == 3 and len(runs) > 3


REPORT = datetime(2026, 11, 23, 5, 59, tzinfo=UTC)
"""A tick of daily-report (timeout 10 min, lease margin 30 s, policy allow) delivered a minute
late, at the start of the test: no schedule needs to fire on the way to it."""


def test_a_run_that_outlives_its_lease_is_taken_over_and_its_late_outcome_refused(
    vigil_stack: VigilStack,
) -> None:
    # Given a run held right after its claim, before its body
    held = vigil_stack.fire("daily-report", at=REPORT, hold=True)
    assert [(t.status, t.attempts) for t in vigil_stack.history("daily-report")] == [("RUNNING", 1)]

    # When its lease runs out (timeout + margin) and a redelivery of the tick arrives
    vigil_stack.advance(minutes=11)  # 10 of them cost most of this test's time (the resyncs)
    (copy,) = vigil_stack.fire("daily-report", at=REPORT)

    # Then the redelivery takes the tick over, and the late run's outcome is refused
    taken_over = copy.attempts[-1].payload
    assert (taken_over["outcome"], taken_over["attempt"]) == ("SUCCEEDED", 2)
    assert taken_over["fencing_token"] > held.fencing_token
    late = held.release().attempts[-1].payload
    assert (late["outcome"], late["fencing_token"]) == ("FENCED", held.fencing_token)
    (tick,) = vigil_stack.history("daily-report")
    assert (tick.status, tick.attempts, tick.fencing_token) == (
        "SUCCEEDED",
        2,
        taken_over["fencing_token"],
    )


def test_holding_a_delivery_that_claims_nothing_is_refused_clearly(
    vigil_stack: VigilStack,
) -> None:
    vigil_stack.fire("daily-report", at=REPORT)

    with pytest.raises(RuntimeError, match=r"did not claim the tick .*DUPLICATE"):
        vigil_stack.fire("daily-report", at=REPORT, hold=True)
    with pytest.raises(ValueError, match="copies at 1"):
        vigil_stack.fire("daily-report", at=REPORT, hold=True, copies=2)  # type: ignore[call-overload]


def test_a_run_held_to_the_end_of_a_test_is_let_go(vigil_stack: VigilStack) -> None:
    held = vigil_stack.fire("daily-report", at=REPORT, hold=True)

    vigil_stack.close()  # what the fixture does when a test ends

    assert not held.held
    assert [t.status for t in vigil_stack.history("daily-report")] == ["SUCCEEDED"]


class Crash(Exception):
    """The run dying after the email went out, before its completion was written."""


def test_a_crash_between_an_effects_intent_and_completion_ends_uncertain_not_a_second_send(
    vigil_stack: VigilStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vigil.jobs import decorator

    sent: list[int] = []
    handle = decorator._handle

    def with_an_email(guard: Any, body: Any, event: Any, context: Any) -> Any:
        def emailing(run: Any) -> Any:
            with run.once("welcome-email") as first:
                if first:
                    sent.append(run.attempt)
                    if len(sent) == 1:
                        raise Crash("died after sending")
            return body(run)

        return handle(guard, emailing, event, context)

    monkeypatch.setattr(decorator, "_handle", with_an_email)
    vigil_stack.fire("cleanup", at=vigil_stack.now() + timedelta(minutes=5))
    vigil_stack.redrive("cleanup")  # the failed tick, delivered again

    (tick,) = vigil_stack.history("cleanup")
    assert (tick.status, tick.uncertain_effect) == ("UNCERTAIN", "welcome-email")
    assert sent == [1]  # not a second email


# Last in this module: these start moto with a reset, which empties the account every test above
# shares (the next vigil_stack would deploy the app again, ~5 CPU s).


def _undeployable(tmp_path: Path) -> Synthesized:
    """A template moto refuses: a GlobalTable it skips, and a reference to it."""
    template = {
        "Resources": {
            "RunsTable": {
                "Type": "AWS::DynamoDB::GlobalTable",
                "Properties": {"AttributeDefinitions": [], "KeySchema": [], "Replicas": []},
                "Metadata": {"aws:cdk:path": "Vigil/Runs/Resource"},
            },
            "Alerts": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"QueueName": {"Fn::GetAtt": ["RunsTable", "Arn"]}},
            },
        }
    }
    return Synthesized(outdir=tmp_path, template=template, assets={})


def test_a_template_moto_cannot_deploy_names_the_resource_and_the_reason(tmp_path: Path) -> None:
    with mock_aws(), pytest.raises(DeployFailed) as failed:
        deploy(_undeployable(tmp_path), boto3.Session(region_name="us-east-1"))
    message = str(failed.value)
    assert "references undefined resource RunsTable" in message
    assert (
        "resource RunsTable (AWS::DynamoDB::GlobalTable, Vigil/Runs/Resource): "
        "moto's CloudFormation does not support this type"
    ) in message


def test_the_fixture_fails_with_that_message_not_a_stack_trace(tmp_path: Path) -> None:
    from vigil_tools.testing.plugin import _Session

    session = _Session.__new__(_Session)  # the app's synthesis, replaced by a broken template
    session.synth, session.account = _undeployable(tmp_path), None
    with mock_aws(), pytest.raises(pytest.fail.Exception) as failed:
        session.account_for_test()
    assert failed.value.pytrace is False
    assert "resource RunsTable (AWS::DynamoDB::GlobalTable" in str(failed.value)


def test_after_another_tests_reset_the_stack_is_back_without_a_deploy_and_leaks_nothing(
    _vigil_session: Any,
) -> None:
    """Another test's ``mock_aws()`` resets moto between two kit tests: the next ``vigil_stack``
    puts the deployed account back (the same deployment, no second deploy) and empties it; the
    other test saw none of the kit's data, and the kit sees none of the other test's."""
    from vigil_tools.testing.plugin import deployed_stack

    with deployed_stack(_vigil_session) as first:
        first.fire("cleanup")
        sessions = first.table("Sessions")
        first.account.session.client("dynamodb").put_item(
            TableName=sessions, Item={"id": {"S": "left-by-the-first-test"}}
        )
        tables = first.account.session.client("dynamodb").list_tables()["TableNames"]

    with mock_aws():  # another test: moto reset, an account of its own
        other = boto3.client("dynamodb", region_name="us-east-1")
        assert other.list_tables()["TableNames"] == []
        other.create_table(
            TableName="another-tests-table",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="another-tests-queue")

    with deployed_stack(_vigil_session) as second:
        assert second.account is first.account  # put back, not deployed again
        dynamodb = second.account.session.client("dynamodb")
        assert dynamodb.list_tables()["TableNames"] == tables
        assert dynamodb.scan(TableName=sessions)["Items"] == []
        assert second.history("cleanup") == []
        queues = second.account.session.client("sqs").list_queues().get("QueueUrls", [])
        assert not [q for q in queues if q.endswith("another-tests-queue")]
        second.fire("cleanup")  # and it runs as deployed
        assert [t.status for t in second.history("cleanup")] == ["SUCCEEDED"]

    with mock_aws():  # and the test after it sees an empty moto again
        assert boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"] == []


def test_after_another_tests_reset_the_deployments_objects_read_as_deployed(
    _vigil_session: Any,
) -> None:
    """moto's S3 reset closes every object's buffer and forgets who owns each bucket before it
    drops the backend: the account put back still serves the deployed assets' bytes, and knows
    its buckets (CreateBucket of one is the owner's no-op, not an empty bucket in its place)."""
    from vigil_tools.testing.plugin import deployed_stack

    def objects(stack: VigilStack) -> dict[tuple[str, str], bytes]:
        s3 = stack.account.session.client("s3")
        return {
            (bucket["Name"], item["Key"]): s3.get_object(Bucket=bucket["Name"], Key=item["Key"])[
                "Body"
            ].read()
            for bucket in s3.list_buckets()["Buckets"]
            for item in s3.list_objects_v2(Bucket=bucket["Name"]).get("Contents", [])
        }

    with deployed_stack(_vigil_session) as first:
        deployed = objects(first)
    assert deployed  # the app's code assets

    with mock_aws():  # another test: moto reset
        pass

    with deployed_stack(_vigil_session) as second:
        assert second.account is first.account
        assert objects(second) == deployed
        s3 = second.account.session.client("s3")
        for bucket in {bucket for bucket, _ in deployed}:
            s3.create_bucket(Bucket=bucket)  # us-east-1: the owner's bucket, as it is
        assert objects(second) == deployed
