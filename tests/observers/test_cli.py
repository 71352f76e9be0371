"""The operator CLI against the API handler in-process, and its SigV4 transport over HTTP."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials

from handlers import observers_api
from tests.helpers.observers import REGISTRY_TABLE, leave_uncertain
from vigil_tools.api_client import HttpRequest, HttpResponse, InProcessTransport, SigV4Transport
from vigil_tools.cli import EXIT_API_ERROR, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def vigil(api_env: None) -> Run:
    transport = InProcessTransport(observers_api.handler)

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), transport=transport, stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    return run


def test_given_the_fleet_when_an_operator_manages_an_observer_then_each_step_reads_well(
    vigil: Run,
) -> None:
    assert vigil("observers", "kinds") == (EXIT_OK, "price-watch\nticker\n", "")

    code, out, _ = vigil(
        "observers", "create", "btc", "--kind", "ticker", "--config", '{"interval_seconds": 2}'
    )
    assert code == EXIT_OK
    assert out.startswith("created btc: status PENDING, desired RUNNING")
    assert '{"interval_seconds": 2}' in out

    code, out, _ = vigil("observers", "list")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "KIND", "STATUS", "DESIRED", "GEN", "RESTARTS", "HEARTBEAT"]
    assert row.split() == ["btc", "ticker", "PENDING", "RUNNING", "0", "0", "-"]

    code, out, _ = vigil("observers", "stop", "btc")
    assert code == EXIT_OK and out.startswith("stopping btc: status STOPPED, desired STOPPED")

    code, out, _ = vigil("observers", "restart", "btc")
    assert code == EXIT_OK and "desired RUNNING" in out.splitlines()[0]

    code, out, _ = vigil("observers", "get", "btc")
    assert code == EXIT_OK and "restarts" in out and "generation" in out


def test_given_json_output_when_listing_then_the_api_objects_across_pages(vigil: Run) -> None:
    vigil("observers", "create", "a", "--kind", "ticker")
    vigil("observers", "create", "b", "--kind", "ticker")
    vigil("observers", "stop", "b")

    code, out, _ = vigil("--json", "observers", "list", "--status", "stopped")

    assert code == EXIT_OK
    assert [o["name"] for o in json.loads(out)] == ["b"]


def test_given_a_retry_with_the_same_key_when_creating_then_the_same_answer(vigil: Run) -> None:
    args = ("--json", "observers", "create", "btc", "--kind", "ticker", "--idempotency-key", "r1")

    first = vigil(*args)
    again = vigil(*args)

    assert first[0] == again[0] == EXIT_OK and json.loads(first[1]) == json.loads(again[1])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("observers", "get", "ghost"), "no observer named 'ghost' (observer_not_found, HTTP 404)"),
        (("observers", "create", "x", "--kind", "nope"), "unknown_kind, HTTP 422"),
        (("observers", "get", "Bad_Name"), "invalid_name, HTTP 422"),
    ],
)
def test_given_a_refused_request_when_run_then_exit_1_and_the_api_reason(
    vigil: Run, argv: tuple[str, ...], message: str
) -> None:
    code, out, err = vigil(*argv)

    assert (code, out) == (EXIT_API_ERROR, "")
    assert message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("observers", "create", "x", "--kind", "ticker", "--config", "[1]"), "JSON object"),
        (("observers", "create", "x", "--kind", "ticker", "--config", "{oops"), "not JSON"),
        (("observers", "create", "x", "--kind", "ticker", "--config", "@/no/such"), "cannot read"),
        (("observers", "list", "--status", "asleep"), "invalid choice"),
        (("observers", "create", "x"), "--kind"),
        (("observers",), "required"),
        (("observers", "settle", "btc", "--effect", "e"), "--done --done-rerun --not-done"),
        (("observers", "settle", "btc", "--done"), "--effect"),
        (("observers", "settle", "btc", "--effect", "e", "--done", "--not-done"), "not allowed"),
        (("observers", "settle", "btc", "--effect", "e", "--done-rerun", "--done"), "not allowed"),
    ],
)
def test_given_bad_input_when_run_then_exit_2_without_calling_the_api(
    argv: tuple[str, ...], message: str
) -> None:
    def refuse(request: HttpRequest) -> HttpResponse:
        raise AssertionError("the API must not be called")

    err = io.StringIO()

    code = main(list(argv), transport=refuse, stdout=io.StringIO(), stderr=err)

    assert code == EXIT_USAGE and message in err.getvalue()


def test_given_no_endpoint_when_run_then_exit_3_saying_how_to_set_one() -> None:
    err = io.StringIO()

    code = main(["observers", "kinds"], stderr=err, environ={})

    assert code == EXIT_UNREACHABLE and "VIGIL_API_URL" in err.getvalue()


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )
        status = 404 if "ghost" in self.path else 200
        payload = (
            {"error": "observer_not_found", "message": "no observer named 'ghost'"}
            if status == 404
            else {"kinds": ["ticker"]}
        )
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    _Recorder.seen = []
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/prod"
    server.shutdown()
    thread.join()


def test_given_an_endpoint_when_calling_then_requests_are_sigv4_signed_for_execute_api(
    recorder: str,
) -> None:
    transport = SigV4Transport(
        recorder, region="eu-west-1", credentials=Credentials("AKIDEXAMPLE", "secret")
    )
    out = io.StringIO()

    code = main(["observers", "kinds"], transport=transport, stdout=out)
    refused = main(["observers", "get", "ghost"], transport=transport, stderr=io.StringIO())

    assert (code, out.getvalue(), refused) == (EXIT_OK, "ticker\n", EXIT_API_ERROR)
    request = _Recorder.seen[0]
    assert request["path"] == "/prod/kinds"
    authorization = request["headers"]["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    assert "X-Amz-Date" in request["headers"]


def test_given_an_unreachable_endpoint_when_calling_then_exit_3() -> None:
    transport = SigV4Transport(
        "http://127.0.0.1:9", region="us-east-1", credentials=Credentials("a", "b"), timeout=2
    )
    err = io.StringIO()

    assert main(["observers", "kinds"], transport=transport, stderr=err) == EXIT_UNREACHABLE
    assert "cannot reach" in err.getvalue()


def test_given_the_jobs_group_when_the_stack_is_missing_then_exit_1_naming_it(aws: None) -> None:
    err = io.StringIO()

    code = main(
        ["jobs", "--stack", "NotDeployed", "list"],
        session=boto3.Session(region_name="us-east-1"),
        stderr=err,
    )

    assert code == EXIT_API_ERROR and "NotDeployed" in err.getvalue()


def test_given_the_jobs_group_without_a_command_when_run_then_usage_error() -> None:
    err = io.StringIO()

    assert main(["jobs"], stderr=err) == EXIT_USAGE
    assert "required" in err.getvalue()


def test_given_an_uncertain_observer_when_an_operator_settles_it_then_each_step_says_what_next(
    vigil: Run, dynamodb: Any
) -> None:
    vigil("observers", "create", "btc", "--kind", "ticker")
    vigil("observers", "create", "eth", "--kind", "ticker")
    leave_uncertain(dynamodb, REGISTRY_TABLE, "btc", "page:incident-7")

    code, out, _ = vigil("observers", "list")
    header, btc, eth = out.splitlines()
    assert header.split()[-1] == "UNCERTAIN"
    assert (btc.split()[-1], eth.split()[-1]) == ("page:incident-7", "-")

    code, out, _ = vigil("observers", "get", "btc")
    assert "uncertain_effect" in out and "never recorded done" in out
    assert out.rstrip().endswith(
        "`vigil observers settle btc --effect page:incident-7 --done|--done-rerun|--not-done`"
    )

    code, out, err = vigil("observers", "settle", "btc", "--effect", "page:x", "--done")
    assert (code, out) == (EXIT_API_ERROR, "")
    assert "uncertain on effect 'page:incident-7', not 'page:x'" in err
    assert "(not_settleable, HTTP 409)" in err

    code, out, _ = vigil("observers", "settle", "btc", "--effect", "page:incident-7", "--not-done")
    assert code == EXIT_OK
    assert out.splitlines() == [
        "settled btc: effect 'page:incident-7' cleared: the next generation does it again",
        "restart requested: status PENDING, desired RUNNING; the reconciler starts generation 2",
        "next: `vigil observers get btc` (status RUNNING once it has claimed)",
    ]
    code, out, _ = vigil("observers", "list")
    assert "UNCERTAIN" not in out
