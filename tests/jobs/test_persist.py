"""persist(): retries what AWS calls transient while there is time, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from vigil.persist import Backoff, OutOfTime, is_ambiguous, is_transient, persist


def client_error(code: str, status: int = 400, reasons: list[str] | None = None) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, "TransactWriteItems")  # type: ignore[arg-type]


THROTTLE = client_error("ProvisionedThroughputExceededException")


class Script:
    """A write that raises the given errors in turn, then returns 'written'."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "written"


class Time:
    def __init__(self, left: float) -> None:
        self.left = left
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.left -= seconds


@pytest.mark.parametrize(
    "error",
    [
        THROTTLE,
        client_error("ThrottlingException"),
        client_error("InternalServerError", 500),
        client_error("ServiceUnavailable", 503),
        client_error("TransactionInProgressException"),
        client_error("TransactionCanceledException", reasons=["None", "TransactionConflict"]),
        client_error("TransactionCanceledException", reasons=["ThrottlingError", "None"]),
        ReadTimeoutError(endpoint_url="https://dynamodb"),
        ConnectionClosedError(endpoint_url="https://dynamodb"),
    ],
)
def test_transient_faults_are_retried_until_the_write_lands(error: BaseException) -> None:
    # Given a write that fails once with a transient fault, and time to spare
    write, time = Script(error), Time(left=60)

    # When it is persisted
    result = persist(write, time_left_s=lambda: time.left, sleep=time.sleep, draw=lambda: 1.0)

    # Then it lands on the second try, after one backoff pause
    assert (result, write.calls, time.pauses) == ("written", 2, [0.1])


@pytest.mark.parametrize(
    "error",
    [
        client_error("ConditionalCheckFailedException"),
        client_error("ValidationException"),
        client_error("TransactionCanceledException", reasons=["ConditionalCheckFailed", "None"]),
        client_error(
            "TransactionCanceledException",
            reasons=["ConditionalCheckFailed", "TransactionConflict"],
        ),
        ValueError("a bug"),
    ],
)
def test_final_errors_are_raised_at_once(error: BaseException) -> None:
    write, time = Script(error), Time(left=60)
    with pytest.raises(type(error)):
        persist(write, time_left_s=lambda: time.left, sleep=time.sleep)
    assert (write.calls, time.pauses) == (1, [])


def test_the_clean_path_costs_one_request_and_no_pause() -> None:
    write, time = Script(), Time(left=60)
    assert persist(write, time_left_s=lambda: time.left, sleep=time.sleep) == "written"
    assert (write.calls, time.pauses) == (1, [])


def test_backoff_grows_to_its_cap_with_full_jitter() -> None:
    write, time = Script(*[THROTTLE] * 8), Time(left=600)
    retries: list[int] = []

    persist(
        write,
        time_left_s=lambda: time.left,
        sleep=time.sleep,
        backoff=Backoff(base_s=0.5, cap_s=4.0, reserve_s=1.0),
        draw=lambda: 0.5,
        on_retry=lambda _error, retry: retries.append(retry),
    )

    assert time.pauses == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    assert retries == [1, 2, 3, 4, 5, 6, 7, 8]


def test_running_out_of_time_raises_out_of_time_from_the_last_fault() -> None:
    # Given a throttle that outlasts the caller's remaining time (keeping the reserve)
    write, time = Script(*[THROTTLE] * 100), Time(left=5.0)

    with pytest.raises(OutOfTime) as raised:
        persist(
            write,
            time_left_s=lambda: time.left,
            sleep=time.sleep,
            backoff=Backoff(base_s=1.0, cap_s=1.0, reserve_s=2.0),
            draw=lambda: 1.0,
        )

    # Then it stopped while the reserve was still there, and says why
    assert time.left >= 2.0
    assert raised.value.__cause__ is not None
    assert raised.value.attempts == write.calls == 4
    assert raised.value.ambiguous is False


def test_an_answer_that_may_hide_an_applied_write_is_flagged_ambiguous() -> None:
    write, time = Script(ReadTimeoutError(endpoint_url="x"), *[THROTTLE] * 50), Time(left=3.0)
    with pytest.raises(OutOfTime) as raised:
        persist(write, time_left_s=lambda: time.left, sleep=time.sleep, draw=lambda: 1.0)
    assert raised.value.ambiguous is True
    assert is_ambiguous(client_error("InternalServerError", 500))
    assert not is_ambiguous(THROTTLE)
    assert not is_transient(client_error("AccessDeniedException"))


HAND_KEPT_BEFORE = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "SlowDown",
    }
)
"""The throttle codes ``persist`` kept by hand until issue 34 (it missed SQS's)."""


def test_the_throttle_codes_are_botocores_and_cover_the_old_list_and_sqs_own() -> None:
    from vigil.throttles import throttle_codes

    codes = throttle_codes()
    assert HAND_KEPT_BEFORE | {"RequestThrottled"} <= codes
    assert all(is_transient(client_error(code)) for code in codes)
    assert not is_transient(client_error("ConditionalCheckFailedException"))


def test_a_throttle_a_service_model_marks_is_one_too() -> None:
    from vigil.throttles import _modeled_throttles

    shapes = {
        "SlowDownPlease": {"exception": True, "retryable": {"throttling": True}},
        "Conflict": {"exception": True, "retryable": {"throttling": False}},
        "Coded": {"exception": True, "retryable": {"throttling": True}, "error": {"code": "C"}},
    }
    assert sorted(_modeled_throttles(shapes)) == ["C", "SlowDownPlease"]
