"""Writes that must land: the outcome of work already done, retried through transient faults.

A run that has done its work (a job's body returned, an observer's child exited, a task finished)
must not lose that fact to one throttled request: the next delivery would do the work again. So
such writes go through :func:`persist`, which retries what AWS documents as transient (throttles,
5xx answers, timeouts, dropped connections) with capped exponential backoff and full jitter, for
as long as the caller has time left, and never retries what is final (a refused condition, a
validation error).

Which codes are throttles is botocore's knowledge (:mod:`vigil.throttles`), not a list kept
here. Botocore already retries a few times on its own; these retries come after those, and cost nothing
on the clean path (the first write succeeds and returns at once)::

    write --throttled--> pause ~U(0, base*2^0) --> write --503--> pause ~U(0, base*2^1) --> write ok
                                                                       |
                     out of time (time_left < pause + reserve): raise OutOfTime from the last error

An answer can be ambiguous: a timeout or a 5xx may come back after DynamoDB applied the write. A
retry of a conditional write then meets its own earlier write and is refused: the caller resolves
that from what it reads back (see :func:`is_ambiguous`), never by guessing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

from vigil.clock import Sleeper
from vigil.throttles import throttle_codes

T = TypeVar("T")

SERVER_CODES = frozenset(
    {
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        # Another request with the same ClientRequestToken is still being applied.
        "TransactionInProgressException",
    }
)
CANCELLATION_TRANSIENT = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
"""Reasons inside a ``TransactionCanceledException`` that applied nothing and may clear."""


def error_code(error: BaseException) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def _status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def is_transient(error: BaseException) -> bool:
    """A fault that may clear by itself: worth another try of the same request."""
    if isinstance(error, ConnectionError | HTTPClientError):
        return True
    if not isinstance(error, ClientError):
        return False
    code = error_code(error)
    if code in SERVER_CODES or code in throttle_codes():
        return True
    if code == "TransactionCanceledException":
        reasons = [r.get("Code") for r in error.response.get("CancellationReasons", []) or []]
        transient = [r for r in reasons if r not in (None, "None")]
        return bool(transient) and all(r in CANCELLATION_TRANSIENT for r in transient)
    return _status(error) >= 500


def is_ambiguous(error: BaseException) -> bool:
    """An answer that does not say whether the write was applied (it may have been)."""
    if isinstance(error, ConnectionError | HTTPClientError):
        return True
    return isinstance(error, ClientError) and (
        error_code(error) in SERVER_CODES or _status(error) >= 500
    )


class OutOfTime(Exception):
    """The write kept failing transiently until the caller's time ran out; ``__cause__`` says
    why. Nothing is known to have been written (unless ``ambiguous``)."""

    def __init__(self, message: str, *, attempts: int, ambiguous: bool) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.ambiguous = ambiguous


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with full jitter (AWS's recommended default)."""

    base_s: float = 0.1
    cap_s: float = 5.0
    reserve_s: float = 2.0
    """Time kept back after the last pause: the write itself, and what the caller does after."""

    def pause(self, retry: int, draw: float) -> float:
        # The exponent is capped too: past the cap it changes nothing, and 2.0**1024 overflows.
        return draw * min(self.cap_s, self.base_s * 2.0 ** min(retry, 64))


DEFAULT_BACKOFF = Backoff()

LAMBDA_WRITE_CONFIG = Config(
    connect_timeout=1, read_timeout=2, retries={"mode": "standard", "total_max_attempts": 2}
)
"""The client a Lambda function records finished work with. botocore's defaults (60 s to connect
and 60 s to read, DynamoDB's legacy retries up to 10 times) let one try outlast the invocation, and
Lambda resets a timed-out container: the outcome it would have remembered is gone. A DynamoDB
single-item or transactional write answers in milliseconds; these bound one try."""


def write_client(service: str, region: str | None = None) -> Any:
    """A boto3 client of ``service`` with :data:`LAMBDA_WRITE_CONFIG`; ``region`` the one the
    caller's environment names (else boto3's own lookup: Lambda and ECS set ``AWS_REGION``)."""
    import boto3

    return boto3.client(service, config=LAMBDA_WRITE_CONFIG, region_name=region)


LAMBDA_WRITE_TRY_S = 2 * (1 + 2) + 1
"""The longest one try with :data:`LAMBDA_WRITE_CONFIG` takes: two attempts of a connect and a
read, and standard mode's pause of at most 1 s between them."""
FINISH_BACKOFF = Backoff(reserve_s=LAMBDA_WRITE_TRY_S + 1)
"""Retries of a Lambda's finish: a retry starts only with a whole try's time left (and 1 s more to
report), so the last try ends before Lambda's timeout and an outcome not written is remembered."""


def persist(
    write: Callable[[], T],
    *,
    time_left_s: Callable[[], float],
    sleep: Sleeper,
    backoff: Backoff = DEFAULT_BACKOFF,
    draw: Callable[[], float] = random.random,
    on_retry: Callable[[BaseException, int], None] | None = None,
) -> T:
    """``write()``, retried through transient faults while ``time_left_s()`` allows.

    ``on_retry(error, retry)`` is told of each retry (for a log line or a metric). A final error
    is raised as it is; running out of time raises :class:`OutOfTime` from the last fault.
    """
    retry = 0
    ambiguous = False
    while True:
        try:
            return write()
        except Exception as error:
            if not is_transient(error):
                raise
            ambiguous = ambiguous or is_ambiguous(error)
            pause = backoff.pause(retry, draw())
            if time_left_s() < pause + backoff.reserve_s:
                raise OutOfTime(
                    f"gave up after {retry + 1} attempts: {error_code(error) or error}",
                    attempts=retry + 1,
                    ambiguous=ambiguous,
                ) from error
            retry += 1
            if on_retry is not None:
                on_retry(error, retry)
            sleep(pause)
