"""``vigil_tools.emulator.moto_names``: moto's SQS attributes, the same answers, named faster.

The first test pins the moto code the workaround relies on: the SQS models reach
``camelcase_to_underscores`` through their module's global, and it is a function of its string
alone. The second reads every attribute of a standard and a FIFO queue both ways and compares.
Cost: a few milliseconds each.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from moto.core import utils
from moto.sqs import models

from vigil_tools.emulator import moto_names

PINNED = {
    "utils.camelcase_to_underscores": "084cdc5bab92db95",
    "Queue.attributes": "40cb990b121628d5",
}
"""The first 16 hex digits of the sha256 of each piece's source in moto 5.2.1."""


def _source(name: str) -> str:
    if name == "utils.camelcase_to_underscores":
        return inspect.getsource(utils.camelcase_to_underscores)
    return inspect.getsource(models.Queue.attributes.fget)  # type: ignore[attr-defined]


def test_the_moto_code_the_workaround_answers_for_is_unchanged() -> None:
    digests = {n: hashlib.sha256(_source(n).encode()).hexdigest()[:16] for n in PINNED}
    assert digests == PINNED


@pytest.fixture
def as_is() -> Iterator[None]:
    """moto as it is for the test; afterwards as it was before."""
    was = moto_names.installed()
    moto_names.uninstall()
    yield
    if was:
        moto_names.install()


def attributes() -> list[dict[str, str]]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        plain = sqs.create_queue(QueueName="plain")["QueueUrl"]
        fifo = sqs.create_queue(
            QueueName="ordered.fifo", Attributes={"FifoQueue": "true", "DelaySeconds": "5"}
        )["QueueUrl"]
        sqs.send_message(QueueUrl=plain, MessageBody="{}")
        return [
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            for url in (plain, fifo)
        ]


def test_every_attribute_of_every_kind_of_queue_is_the_same(as_is: None) -> None:
    expected = attributes()
    assert moto_names.install() and hasattr(models.camelcase_to_underscores, "cache_info")
    try:
        answered = attributes()
    finally:
        moto_names.uninstall()
    drop = ("CreatedTimestamp", "LastModifiedTimestamp", "QueueArn")
    assert [{k: v for k, v in a.items() if k not in drop} for a in answered] == [
        {k: v for k, v in e.items() if k not in drop} for e in expected
    ]
    assert len(expected[1]) > len(expected[0]) > 10
