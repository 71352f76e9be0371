"""Each test's boto3 session (moto makes a new one per mock) shares the process's model loader."""

from __future__ import annotations

import boto3
from moto import mock_aws

from vigil_tools.emulator import model_loader


def test_sessions_share_one_loader_and_stay_their_own() -> None:
    assert model_loader.installed()  # by tests/conftest.py
    first, second = boto3.session.Session(), boto3.session.Session()

    assert first is not second
    assert first._loader is second._loader  # type: ignore[attr-defined]


def test_a_client_of_a_new_session_under_a_new_mock_still_works() -> None:
    for name in ("first", "second"):
        with mock_aws():
            client = boto3.client("sqs", region_name="us-east-1")
            client.create_queue(QueueName=name)
            assert [url.rsplit("/", 1)[1] for url in client.list_queues()["QueueUrls"]] == [name]


def test_uninstalled_each_session_has_its_own_loader() -> None:
    model_loader.uninstall()
    try:
        first, second = boto3.session.Session(), boto3.session.Session()
        assert first._loader is not second._loader  # type: ignore[attr-defined]
    finally:
        model_loader.install()
