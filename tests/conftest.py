"""Shared fixtures: every AWS call in the suite goes to moto, and time comes from a manual clock."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from vigil.clock import ManualClock

REGION = "us-east-1"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Which Python this run proves: the runtime Lambda and the observer image run, or another."""
    terminalreporter.write_line(_runtime_line())


def _runtime_line() -> str:
    from infra.function import RUNTIME

    lambda_version = RUNTIME.name.removeprefix("python")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if here == lambda_version:
        return f"vigil: Python {here}, the version Lambda and the observer image run"
    return (
        f"vigil: WARNING: Python {here}, but Lambda and the observer image run {lambda_version}: "
        f"this run does not prove the deployed runtime (install Python {lambda_version})"
    )


def pytest_configure(config: pytest.Config) -> None:
    """The ``vigil_stack`` plugin, as ``pip install .`` registers it (entry point ``pytest11``):
    registered here when this checkout's installed metadata predates the entry point."""
    import freezegun

    from vigil_tools.testing import plugin

    # Frozen clocks in tests must not freeze pytest's own timing, or --durations reports years.
    freezegun.configure(extend_ignore_list=["_pytest.timing"])
    if not config.pluginmanager.is_registered(plugin):
        config.pluginmanager.register(plugin, "vigil")
    from vigil_tools.emulator import moto_speed

    moto_speed.install()  # moto's DynamoDB writes, minus the repeated parsing (its docstring)


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials everywhere, so no test can reach a real account by accident."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_DEV", "false")


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The app's CloudFormation template, synthesized once per test session."""
    from vigil_tools.emulator.template import synthesized_app

    return synthesized_app()


@pytest.fixture(scope="session")
def staging(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A named stage's app (``-c stage=staging``), synthesized once per test session: the stages'
    tests and the scanners share it (about as long as the default's synth)."""
    from app import build_app
    from tests.helpers.stages import STAGING
    from vigil.contract.stages import stack_name
    from vigil_tools.emulator.template import load

    outdir = tmp_path_factory.mktemp("staging")
    build_app(outdir=str(outdir), stage=STAGING).synth()
    return load(outdir, stack_name(STAGING))


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC))


@pytest.fixture
def dynamodb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


class SerializedClient:
    """Wraps a boto3 client so requests from many threads reach moto one at a time.

    moto applies a request non-atomically (NOTES.md); real DynamoDB applies each request atomically.
    One lock around each call gives moto the same per-request atomicity while the threads still
    interleave between requests, which is where the races in the guard live.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


@pytest.fixture
def serialized() -> type[SerializedClient]:
    return SerializedClient


os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
