"""``vigil tasks``: what an operator types, against two tasks on moto (the stack's outputs stubbed)."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3

from tests.helpers.tasks import ORDERED, PLAIN, Stack
from vigil.contract.tasks import TaskStatus
from vigil.tasks.envelope import parse
from vigil_tools.cli import EXIT_API_ERROR, EXIT_OK, EXIT_USAGE, main


class Outputs:
    """CloudFormation as ``describe_stacks`` answers for a deployed stack (``Vigil`` only)."""

    class exceptions:
        ClientError = LookupError

    def __init__(self, outputs: dict[str, str]) -> None:
        self.outputs = outputs

    def describe_stacks(self, StackName: str = "") -> dict[str, Any]:
        if StackName not in ("Vigil", ""):
            raise LookupError(f"Stack with id {StackName} does not exist")
        listed = [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()]
        return {"Stacks": [{"StackName": "Vigil", "Outputs": listed}]}


class Session:
    def __init__(self, stack: Stack, outputs: dict[str, str] | None = None) -> None:
        catalog = {"TasksCatalog": stack.catalog.to_json()}
        self.clients = {
            "cloudformation": Outputs(catalog if outputs is None else outputs),
            "sqs": stack.sqs,
            "dynamodb": stack.dynamodb,
            "scheduler": stack.scheduler,
            "ssm": boto3.client("ssm", region_name="us-east-1"),
            "s3": stack.s3,
        }

    def client(self, name: str) -> Any:
        return self.clients[name]


def vigil(stack: Stack, *argv: str, outputs: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["tasks", *argv], session=Session(stack, outputs), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_enqueue_get_list_and_cancel(stack: Stack) -> None:
    code, out, err = vigil(stack, "enqueue", PLAIN, "--payload", '{"order": 7}', "--key", "order-7")
    assert (code, out, err) == (EXIT_OK, "order-7\n", "")
    assert len(stack.messages(stack.catalog.spec(PLAIN).queue_url)) == 1

    code, out, _ = vigil(stack, "get", PLAIN, "order-7")
    assert code == EXIT_OK and "QUEUED" in out and "order-7" in out

    code, out, _ = vigil(stack, "list", PLAIN, "--status", "queued")
    assert code == EXIT_OK
    assert out.splitlines()[0].split()[:3] == ["ID", "STATUS", "ATTEMPTS"]
    assert out.splitlines()[1].split()[:2] == ["order-7", "QUEUED"]

    code, out, _ = vigil(stack, "cancel", PLAIN, "order-7")
    assert (code, out) == (EXIT_OK, "send-receipt order-7: CANCELLED\n")
    code, out, err = vigil(stack, "cancel", PLAIN, "order-7")
    assert code == EXIT_API_ERROR and "it has ended, there is nothing to cancel" in err


def test_bad_input_is_refused_plainly_and_sends_nothing(stack: Stack) -> None:
    queue = stack.catalog.spec(PLAIN).queue_url
    code, _, err = vigil(stack, "enqueue", "send-reciept")
    assert code == EXIT_API_ERROR
    assert "unknown task 'send-reciept'" in err and PLAIN in err and ORDERED in err
    code, _, err = vigil(stack, "enqueue", PLAIN, "--payload", "{not json")
    assert code == EXIT_API_ERROR and "--payload is not JSON" in err
    code, _, err = vigil(stack, "enqueue", PLAIN, "--group", "tenant-1")
    assert code == EXIT_API_ERROR and "not ordered" in err
    code, _, err = vigil(stack, "enqueue", PLAIN, "--at", "2026-12-01T10:00:00")
    assert code == EXIT_USAGE and "no time zone" in err
    code, _, err = vigil(stack, "get", PLAIN, "never-enqueued")
    assert code == EXIT_API_ERROR and "no task send-receipt never-enqueued" in err
    assert stack.messages(queue) == []


def test_a_stack_without_tasks_is_a_clear_error(stack: Stack) -> None:
    code, _, err = vigil(stack, "list", PLAIN, outputs={})  # and no catalog under its path
    assert code == EXIT_API_ERROR and "declares no tasks" in err
    code, _, err = vigil(stack, "--stack", "Other", "list", PLAIN)
    assert code == EXIT_API_ERROR and "stack 'Other' not found" in err
    assert "Vigil stacks deployed here: Vigil" in err


def test_the_tasks_are_read_from_the_stacks_catalog_in_ssm(stack: Stack) -> None:
    """A stack of the shards keeps its tasks in SSM parameters under /vigil/<stack>/tasks, each
    part some entries and one what they share (``vigil.catalog``): the CLI finds them there."""
    ssm = boto3.client("ssm", region_name="us-east-1")
    entries = json.loads(stack.catalog.to_json())
    shared = {"table": entries[PLAIN]["table"], "schedule_group": entries[PLAIN]["schedule_group"]}
    for index, name in enumerate(sorted(entries)):
        own = {k: v for k, v in entries[name].items() if k not in shared}
        ssm.put_parameter(
            Name=f"/vigil/Vigil/tasks/{index}", Value=json.dumps({name: own}), Type="String"
        )
    ssm.put_parameter(Name="/vigil/Vigil/tasks/stack", Value=json.dumps(shared), Type="String")

    code, out, err = vigil(stack, "enqueue", PLAIN, "--key", "k-ssm", outputs={})

    assert (code, out, err) == (EXIT_OK, "k-ssm\n", "")
    assert len(stack.messages(stack.catalog.spec(PLAIN).queue_url)) == 1


def test_redrive_sends_tasks_back_marked_and_keeps_what_is_not_a_task(stack: Stack) -> None:
    for spec_name, group in ((PLAIN, None), (ORDERED, "tenant-1")):
        spec = stack.catalog.spec(spec_name)
        client = stack.client()
        plan = client.plan(spec_name, {"n": 1}, key="k-1", group=group)
        fifo = spec.dead_letter_url.endswith(".fifo")
        extra = {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if fifo else {}
        for body in (plan.body, "not a task"):
            stack.sqs.send_message(QueueUrl=spec.dead_letter_url, MessageBody=body, **extra)
            extra = {"MessageGroupId": "g", "MessageDeduplicationId": "d2"} if fifo else {}

        code, out, _ = vigil(stack, "redrive", spec_name)

        assert code == EXIT_OK
        assert f"redrove 1 task(s) of {spec_name}" in out and "kept" in out
        [back] = stack.messages(spec.queue_url)
        envelope = parse(back["Body"], expected_task=spec_name)
        assert (envelope.id, envelope.redriven) == ("k-1", True)
        [left] = stack.messages(spec.dead_letter_url)
        assert left["Body"] == "not a task"


def test_json_output_is_the_records_own(stack: Stack) -> None:
    vigil(stack, "enqueue", PLAIN, "--key", "order-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["--json", "tasks", "get", PLAIN, "order-8"], session=Session(stack), stdout=out, stderr=err
    )
    assert code == EXIT_OK
    assert json.loads(out.getvalue())["status"] == "QUEUED"


def test_the_status_filter_takes_any_case_and_an_unknown_one_names_the_statuses(
    stack: Stack,
) -> None:
    vigil(stack, "enqueue", PLAIN, "--key", "o-1")
    vigil(stack, "cancel", PLAIN, "o-1")
    for spelling in ("cancelled", "Cancelled", "CANCELLED"):
        code, out, _ = vigil(stack, "list", PLAIN, "--status", spelling)
        assert code == EXIT_OK and "o-1" in out, spelling
    code, out, err = vigil(stack, "list", PLAIN, "--status", "done")
    assert (code, out) == (EXIT_USAGE, "")
    assert "--status" in err and all(status in err for status in TaskStatus)


def test_enqueue_many_reads_json_lines_and_prints_each_items_outcome(
    stack: Stack, tmp_path: Any
) -> None:
    """About 0.3 s."""
    vigil(stack, "enqueue", PLAIN, "--key", "o-1")
    lines = [{"payload": {}, "key": "o-1"}, {"payload": {"n": 2}, "key": "o-2"}, {"payload": {}}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    out, err_io = io.StringIO(), io.StringIO()
    argv = ["--json", "tasks", "enqueue-many", PLAIN, str(path)]
    code = main(argv, session=Session(stack, None), stdout=out, stderr=err_io)
    out, err = out.getvalue(), err_io.getvalue()
    assert (code, err) == (EXIT_OK, "")
    outcomes = json.loads(out)
    assert [o["status"] for o in outcomes] == ["duplicate", "enqueued", "enqueued"]
    assert len(stack.messages(stack.catalog.spec(PLAIN).queue_url)) == 3

    path.write_text('{"payload": {}, "key": "ok"}\n{"payload": {}, "colour": "red"}\n')
    code, _, err = vigil(stack, "enqueue-many", PLAIN, str(path))
    assert code == EXIT_API_ERROR and "line 2" in err
    path.write_text('{"payload": {}, "key": "ok"}\n{"payload": [], "key": "bad"}\n')
    code, _, err = vigil(stack, "enqueue-many", PLAIN, str(path))
    assert code == EXIT_API_ERROR and "item 1 (key 'bad')" in err
    assert len(stack.messages(stack.catalog.spec(PLAIN).queue_url)) == 3  # nothing more sent
