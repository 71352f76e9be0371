"""Which AWS error codes are throttles: read from botocore, not typed by hand.

A hand list of codes missed SQS's ``RequestThrottled`` (SendMessage's throttle in botocore's SQS
model and retry config): a dead-letter send throttled past botocore's own retries was taken for a
final error, and the task's record ended ``RunCrashed`` instead of with its body's error. Botocore
already knows, for the version Lambda and the containers run:

* the codes its standard retry mode treats as throttling, for any service (``Throttling``,
  ``ProvisionedThroughputExceededException``, ``RequestThrottled``, ``SlowDown``...);
* the codes its legacy retry config (``_retry.json``) retries as throttles, for every service and
  per service (SQS's ``RequestThrottled``, DynamoDB's ``ProvisionedThroughputExceededException``);
* the error shapes each service's model marks ``retryable: {throttling: true}``.

:func:`throttle_codes` is their union over the services Vigil calls, read on the first error that
needs it (a few models: ~0.1 s, once per process; never on the clean path).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

SERVICES = ("dynamodb", "sqs", "events", "s3", "scheduler", "ecs", "lambda")
"""The services whose writes Vigil retries through ``vigil.persist``."""
LEGACY_THROTTLE_POLICIES = ("throttl", "throughput", "request_limit")
"""How ``_retry.json`` names its throttle policies (``throttling_exception``,
``throughput_exceeded``, SQS's ``request_limit_exceeded``), apart from its 5xx, socket and
crc32 ones."""


@functools.cache
def throttle_codes(services: tuple[str, ...] = SERVICES) -> frozenset[str]:
    """Every error code botocore treats as a throttle for ``services``."""
    from botocore.loaders import Loader
    from botocore.retries.standard import ThrottledRetryableChecker

    loader = Loader()
    codes = set(ThrottledRetryableChecker._THROTTLED_ERROR_CODES)
    retry = loader.load_data("_retry")
    codes.update(_legacy_codes(retry["definitions"], retry["retry"].get("__default__", {})))
    for service in services:
        codes.update(_legacy_codes(retry["definitions"], retry["retry"].get(service, {})))
        model = loader.load_service_model(service, "service-2")
        codes.update(_modeled_throttles(model["shapes"]))
    return frozenset(codes)


def _legacy_codes(definitions: Mapping[str, Any], config: Mapping[str, Any]) -> Iterator[str]:
    """The error codes of a ``_retry.json`` section's throttle policies (``$ref`` resolved)."""
    sections = [config, *config.values()]  # "__default__" nests its own policies one level down
    for section in sections:
        if not isinstance(section, Mapping):
            continue
        for name, policy in (section.get("policies") or {}).items():
            if not any(word in name for word in LEGACY_THROTTLE_POLICIES):
                continue
            resolved = definitions.get(policy.get("$ref", ""), policy)
            code = resolved.get("applies_when", {}).get("response", {}).get("service_error_code")
            if code:
                yield str(code)


def _modeled_throttles(shapes: Mapping[str, Any]) -> Iterator[str]:
    """Error shapes a service's model marks as throttles: their code (or name)."""
    for name, shape in shapes.items():
        if shape.get("exception") and (shape.get("retryable") or {}).get("throttling"):
            yield str((shape.get("error") or {}).get("code") or name)
