"""``vigil_tools.emulator.botocore_speed``: the same answers, worked out once per process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import botocore.hooks
import botocore.regions
import botocore.session
import pytest

from vigil_tools.emulator import botocore_speed


@pytest.fixture
def fast() -> Iterator[None]:
    was = botocore_speed.installed()
    botocore_speed.install()
    yield
    if not was:
        botocore_speed.uninstall()


@pytest.fixture
def as_is() -> Iterator[None]:
    was = botocore_speed.installed()
    botocore_speed.uninstall()
    yield
    if was:
        botocore_speed.install()


def with_kwargs(**kwargs: Any) -> None: ...


def without_kwargs(event_name: str) -> None: ...


class Handler:
    def method(self, **kwargs: Any) -> None: ...

    def strict(self, event_name: str) -> None: ...

    def __call__(self, event_name: str) -> None: ...


def test_a_handler_without_kwargs_is_still_refused_however_often_it_is_registered(
    fast: None,
) -> None:
    emitter = botocore.hooks.HierarchicalEmitter()
    for _ in range(2):
        emitter.register("before-call", with_kwargs)
        emitter.register("before-call", Handler().method)
        for refused in (without_kwargs, Handler().strict, Handler()):
            with pytest.raises(ValueError, match="must accept keyword arguments"):
                emitter.register("before-call", refused)


def test_handlers_are_answered_as_botocore_answers_them(as_is: None) -> None:
    handlers = [with_kwargs, without_kwargs, Handler().method, Handler().strict, Handler()]
    expected = [botocore.hooks.accepts_kwargs(h) for h in handlers]
    botocore_speed.install()
    assert [botocore.hooks.accepts_kwargs(h) for h in handlers] == expected
    assert [botocore.hooks.accepts_kwargs(h) for h in handlers] == expected


def test_event_names_are_aliased_as_each_session_aliases_them(as_is: None) -> None:
    names = [
        "before-call.autoscaling.CreateLaunchConfiguration",
        "after-call.s3.PutObject",
        "before-parameter-build.cloudsearchdomain.Search",
        "needs-retry.dynamodb",
    ]
    emitter = botocore.session.get_session().get_component("event_emitter")
    expected = [emitter._alias_event_name(name) for name in names]
    botocore_speed.install()
    for _ in range(2):
        emitter = botocore.session.get_session().get_component("event_emitter")
        assert [emitter._alias_event_name(name) for name in names] == expected
    own = botocore.hooks.EventAliaser(botocore.hooks.HierarchicalEmitter(), {"s3": "s4"})
    assert own._alias_event_name("after-call.s3.PutObject") == "after-call.s4.PutObject"


def test_clients_of_one_service_share_one_endpoint_provider_and_resolve_alike(
    fast: None, aws: None
) -> None:
    east, again = (boto3.client("dynamodb", region_name="us-east-1") for _ in range(2))
    west = boto3.client("dynamodb", region_name="eu-central-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    providers = [c._ruleset_resolver._provider for c in (east, again, west, s3)]
    assert providers[0] is providers[1] is providers[2] and providers[3] is not providers[0]
    assert east.meta.endpoint_url == "https://dynamodb.us-east-1.amazonaws.com"
    assert west.meta.endpoint_url == "https://dynamodb.eu-central-1.amazonaws.com"
    assert west.list_tables()["TableNames"] == []


def test_the_provider_cache_starts_again_past_its_bound(
    fast: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(botocore_speed, "CACHED_PROVIDERS", 1)
    for service in ("sqs", "sns", "sqs"):
        boto3.client(service, region_name="us-east-1")
    assert len(botocore_speed._providers) == 1


def test_as_is_leaves_botocore_alone(as_is: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_MOTO_AS_IS", "1")
    assert botocore_speed.install() is False
    assert botocore.hooks.accepts_kwargs.__module__ == "botocore.compat"
    assert botocore.regions.EndpointProvider.__module__ == "botocore.endpoint_provider"


def test_handlers_made_per_client_are_not_held_past_the_bound(fast: None) -> None:
    def made(n: int) -> Any:
        def handler(**kwargs: Any) -> int:
            return n

        return handler

    emitter = botocore.hooks.HierarchicalEmitter()
    for n in range(botocore_speed.CACHED_HANDLERS + 50):
        emitter.register("before-call", made(n))
    assert botocore_speed._function_accepts_kwargs.cache_info().currsize <= (
        botocore_speed.CACHED_HANDLERS
    )
